package server

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func (g *gate) queued(c class) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queues[c])
}

// waitQueued waits until n calls of class c are queued (polling a condition).
func waitQueued(t *testing.T, g *gate, c class, n int) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for g.queued(c) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls of class %s queued after %s, want %d: hung", g.queued(c), classNames[c], hangGuard, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// The gate: keep calls before new ones, FIFO within a class, bounded queues (waiting acquires'
// attempts excepted), and a caller that gives up leaves the queue or passes its slot on.
func TestGate(t *testing.T) {
	g := newGate(1, 2, -1, prometheus.NewRegistry())
	ctx := context.Background()
	if err := g.enter(ctx, classNew); err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 8)
	var left sync.WaitGroup // each caller has left (or was refused)
	enter := func(c class, name string) {
		left.Add(1)
		go func() {
			defer left.Done()
			if err := g.enter(ctx, c); err != nil {
				order <- name + ": " + err.Error()
				return
			}
			order <- name
			g.leave()
		}()
	}
	enter(classNew, "new-1")
	waitQueued(t, g, classNew, 1)
	enter(classNew, "new-2")
	waitQueued(t, g, classNew, 2)
	if err := g.enter(ctx, classNew); !errors.Is(err, errOverloaded) {
		t.Fatalf("third queued new call: %v, want errOverloaded", err)
	}
	enter(classNewAdmitted, "waiter") // an attempt of a waiting acquire: queued past the bound
	waitQueued(t, g, classNew, 3)
	// A caller that gives up leaves the queue.
	gone, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- g.enter(gone, classKeep) }()
	waitQueued(t, g, classKeep, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	waitQueued(t, g, classKeep, 0)
	enter(classKeep, "keep")
	waitQueued(t, g, classKeep, 1)
	g.leave()
	for _, want := range []string{"keep", "new-1", "new-2", "waiter"} {
		if got := <-order; got != want {
			t.Fatalf("admitted %q, want %q", got, want)
		}
	}
	left.Wait() // the last one admitted sends its name before it leaves
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight != 0 {
		t.Fatalf("%d in flight after all left", g.inflight)
	}
}

// New calls are shed once the oldest queued new call has waited past the bound; renewals and
// the attempts of waiting acquires still queue, and once the queue has caught up new calls
// queue again.
func TestGateShedsNewWorkWhenTheQueueIsStale(t *testing.T) {
	g := newGate(1, 100, 50*time.Millisecond, prometheus.NewRegistry())
	ctx := context.Background()
	if err := g.enter(ctx, classNew); err != nil {
		t.Fatal(err)
	}
	results := make(chan error, 8)
	enter := func(c class) {
		go func() {
			err := g.enter(ctx, c)
			if err == nil {
				g.leave()
			}
			results <- err
		}()
	}
	enter(classNew)
	waitQueued(t, g, classNew, 1)
	// A fresh queue admits more.
	enter(classNew)
	waitQueued(t, g, classNew, 2)
	// The oldest has now waited a second (set, rather than slept for).
	g.mu.Lock()
	g.queues[classNew][0].since = time.Now().Add(-time.Second)
	g.mu.Unlock()
	if err := g.enter(ctx, classNew); !errors.Is(err, errOverloaded) {
		t.Fatalf("new call behind a stale queue: %v, want errOverloaded", err)
	}
	if !g.shedAtDoor(classNew) {
		t.Fatal("shedAtDoor: a waiting acquire behind a stale queue was not shed")
	}
	enter(classKeep)
	waitQueued(t, g, classKeep, 1)
	enter(classNewAdmitted)
	waitQueued(t, g, classNew, 3)
	g.leave() // the slot goes around: keep first, then the three new calls
	for range 4 {
		if err := <-results; err != nil {
			t.Fatalf("queued call: %v", err)
		}
	}
	// Caught up: the queue is empty and new calls enter again.
	if err := g.enter(ctx, classNew); err != nil {
		t.Fatalf("new call after the queue caught up: %v", err)
	}
	g.leave()
}
