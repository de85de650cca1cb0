package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// exitFenced is CMD's exit code when the resource refused it (a newer token was seen).
const exitFenced = 42

// cmdMain is CMD, the fenced resource's client, run by `baton run` and `baton worker`: enter,
// several writes spread over 100-600 ms, exit, each carrying BATON_FENCING_TOKEN. On SIGTERM it
// records its exit at once, or, if slow (BATON_CHAOS_SLOW=1, or for jobs one token in three),
// keeps writing for 0.5 s first, as a command with a long cleanup would.
func cmdMain() int {
	go func() { _, _ = io.Copy(io.Discard, os.Stdin) }() // a worker's job args
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	tok, err := strconv.ParseUint(os.Getenv("BATON_FENCING_TOKEN"), 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos cmd: BATON_FENCING_TOKEN:", err)
		return 2
	}
	key := os.Getenv("BATON_LOCK_KEY")
	if key == "" {
		key = os.Getenv("BATON_RESOURCE")
	}
	job, _ := strconv.ParseInt(os.Getenv("BATON_JOB_ID"), 10, 64)
	client := os.Getenv("BATON_CHAOS_CLIENT")
	run := os.Getenv("BATON_CHAOS_RUN")
	if run == "" {
		run = fmt.Sprintf("%s/job%d/pid%d", client, job, os.Getpid())
	}
	slow := os.Getenv("BATON_CHAOS_SLOW") == "1" || (os.Getenv("BATON_CHAOS_SLOW") == "" && tok%3 == 0)
	url := os.Getenv("BATON_CHAOS_RESOURCE")
	hc := &http.Client{Timeout: 30 * time.Second}
	send := func(kind, status string) (bool, error) {
		b, _ := json.Marshal(event{Kind: kind, Key: key, Client: client, Run: run, Token: tok, Job: job,
			Status: status, PID: os.Getpid()})
		resp, err := hc.Post(url, "application/json", bytes.NewReader(b))
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		var out struct{ Accepted bool }
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return false, err
		}
		return out.Accepted, nil
	}
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "chaos cmd: resource:", err)
		return 1
	}

	ok, err := send("enter", "")
	if err != nil {
		return fail(err)
	}
	if !ok {
		_, _ = send("exit", "refused")
		return exitFenced
	}
	writes := 3 + rand.IntN(4)
	step := time.Duration(100+rand.IntN(501)) * time.Millisecond / time.Duration(writes)
	for range writes {
		select {
		case <-term:
			if slow {
				for range 5 {
					time.Sleep(100 * time.Millisecond) // the slow cleanup being simulated
					if _, err := send("write", "cleanup"); err != nil {
						return fail(err)
					}
				}
			}
			_, _ = send("exit", "term")
			return 143
		case <-time.After(step):
		}
		ok, err := send("write", "")
		if err != nil {
			return fail(err)
		}
		if !ok {
			_, _ = send("exit", "refused")
			return exitFenced
		}
	}
	if _, err := send("exit", "ok"); err != nil {
		return fail(err)
	}
	return 0
}
