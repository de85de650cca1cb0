// Command fencedcmd is the CMD of the chaos harness (e2e/chaos): a client of the harness's fenced
// resource, run by `baton run` and `baton worker`. It sends enter, several writes spread over
// 100-600 ms, and exit, each fenced with BATON_FENCING_TOKEN (fence.HeaderFromEnv), to BATON_CHAOS_RESOURCE; it stops with
// exit code 42 as soon as the resource refuses it (a newer token was seen). On SIGTERM it
// records its exit at once or, if slow (BATON_CHAOS_SLOW=1, or for jobs one token in three),
// keeps writing for 0.5 s first, as a command with a long cleanup would.
//
// It is a program of its own, built without -race, so that its start is quick even when the
// tests run with -race on a loaded machine: it starts inside every critical section.
package main

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

	"github.com/batonhq/baton/fence"
)

// exitFenced is the exit code when the resource refused a call.
const exitFenced = 42

// event is a call to the resource (the harness's chaos.event, the fields it reads).
type event struct {
	Kind   string `json:"kind"`
	Key    string `json:"key"`
	Client string `json:"client"`
	Run    string `json:"run"`
	Token  uint64 `json:"token"`
	Job    int64  `json:"job"`
	Status string `json:"status"`
	PID    int    `json:"pid"`
}

func main() { os.Exit(run()) }

func run() int {
	go func() { _, _ = io.Copy(io.Discard, os.Stdin) }() // a worker's job args
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	tok, err := strconv.ParseUint(os.Getenv("BATON_FENCING_TOKEN"), 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fencedcmd: BATON_FENCING_TOKEN:", err)
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
	// send makes one call to the resource, fenced with fence.HeaderFromEnv: the resource
	// answers 409 stale_token (refused) once it has seen a newer token for the key.
	send := func(kind, status string) (bool, error) {
		b, _ := json.Marshal(event{Kind: kind, Key: key, Client: client, Run: run, Token: tok, Job: job,
			Status: status, PID: os.Getpid()})
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
		if err != nil {
			return false, err
		}
		req.Header.Set("Content-Type", "application/json")
		if err := fence.HeaderFromEnv(req, key); err != nil {
			return false, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode < 300:
			return true, nil
		case resp.StatusCode == http.StatusConflict:
			return false, nil
		default:
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1000))
			return false, fmt.Errorf("%s: %s", resp.Status, msg)
		}
	}
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "fencedcmd: resource:", err)
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
