// Command fencedcmd is the CMD of the chaos harness (e2e/chaos): a client of the harness's fenced
// resource, run by `baton run` and `baton worker`. It sends enter, several writes spread over
// 100-600 ms, and exit, each fenced with BATON_FENCING_TOKEN (fence.HeaderFromEnv, which also
// sends BATON_FENCING_MODE), to BATON_CHAOS_RESOURCE, once for each key it holds: its lock key
// or job resource, then BATON_RESOURCES, then the slot key of each limit unit
// (fence.LimitSlotKeysFromEnv), which a slot's single holder presents as exclusive. It stops
// with exit code 42 as soon as the resource refuses it on any key (a newer token was seen). On SIGTERM it
// records its exit at once or, if slow (BATON_CHAOS_SLOW=1, or for jobs one token in three),
// keeps writing for 0.5 s first, as a command with a long cleanup would. BATON_CHAOS_SPAN
// lengthens the writes (see spanFromEnv).
//
// It is a program of its own, built without -race, so that its start is quick even when the
// tests run with -race on a loaded machine: it starts inside every critical section.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
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
	Mode   string `json:"mode"`
	Client string `json:"client"`
	Run    string `json:"run"`
	Token  uint64 `json:"token"`
	Job    int64  `json:"job"`
	Status string `json:"status"`
	PID    int    `json:"pid"`
}

// fenced is one key the CMD holds, and the mode it presents there: BATON_FENCING_MODE for its
// lock keys or job resources, exclusive for a limit's slot.
type fenced struct {
	key, mode string
	slot      bool
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
	mode := os.Getenv("BATON_FENCING_MODE")
	keys := []fenced{{key: key, mode: mode}}
	if rs := os.Getenv("BATON_RESOURCES"); rs != "" {
		for _, k := range strings.Split(rs, "\n") {
			keys = append(keys, fenced{key: k, mode: mode})
		}
	}
	slots, err := fence.LimitSlotKeysFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fencedcmd:", err)
		return 2
	}
	for _, k := range slots {
		keys = append(keys, fenced{key: k, mode: string(fence.Exclusive), slot: true})
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
	// unix:PATH is the resource on a Unix socket: a CMD in another network namespace (the
	// partition runs) reaches it whatever the network does.
	if path, ok := strings.CutPrefix(url, "unix:"); ok {
		hc.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}}
		url = "http://resource/"
	}
	// sendKey makes one call to the resource for one key, fenced with fence.HeaderFromEnv
	// (fence.HeaderMode for a slot): the resource answers 409 stale_token (refused) once it has
	// seen a newer token for the key (of a mode this one cannot run beside).
	sendKey := func(k fenced, kind, status string) (bool, error) {
		b, _ := json.Marshal(event{Kind: kind, Key: k.key, Mode: k.mode, Client: client, Run: run, Token: tok, Job: job,
			Status: status, PID: os.Getpid()})
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
		if err != nil {
			return false, err
		}
		req.Header.Set("Content-Type", "application/json")
		if k.slot {
			fence.HeaderMode(req, k.key, tok, fence.Exclusive)
		} else if err := fence.HeaderFromEnv(req, k.key); err != nil {
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
	// send makes the call for every key, in order, and stops at the first refusal or error,
	// except an exit, which every key is told of.
	send := func(kind, status string) (bool, error) {
		all := true
		for _, k := range keys {
			ok, err := sendKey(k, kind, status)
			if err != nil {
				return false, err
			}
			if all = all && ok; !ok && kind != "exit" {
				return false, nil
			}
		}
		return all, nil
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
	if lo, hi, ok := spanFromEnv(); ok {
		step = 150 * time.Millisecond
		writes = int((lo + time.Duration(rand.Int64N(int64(hi-lo)+1))) / step)
	}
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

// spanFromEnv reads BATON_CHAOS_SPAN=MIN-MAX (e.g. 2s-5s): the CMD writes every 150 ms for a
// random span in [MIN, MAX] instead of 100-600 ms, so that it is still inside when a fault
// outlasts a lease.
func spanFromEnv() (lo, hi time.Duration, ok bool) {
	a, b, found := strings.Cut(os.Getenv("BATON_CHAOS_SPAN"), "-")
	if !found {
		return 0, 0, false
	}
	lo, err1 := time.ParseDuration(a)
	hi, err2 := time.ParseDuration(b)
	if err1 != nil || err2 != nil || lo <= 0 || hi < lo {
		fmt.Fprintf(os.Stderr, "fencedcmd: BATON_CHAOS_SPAN=%q: want MIN-MAX such as 2s-5s\n", os.Getenv("BATON_CHAOS_SPAN"))
		os.Exit(2)
	}
	return lo, hi, true
}
