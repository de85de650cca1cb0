package baton

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// The slots' invariants: never more handlers running than capacity, never more in hand than
// capacity and the local queue's room, nor more held than maxHeld, no count below zero, nothing
// left over once every job was reported, and every change that frees room signals it, so that a
// claim loop waiting for room is never left asleep.
func TestSlotsInvariants(t *testing.T) {
	t.Run("each way of freeing room signals", func(t *testing.T) {
		for _, c := range []struct {
			name string
			fill func(s *slots) // leaves no room
			free func(s *slots)
		}{
			{"a handler returned", func(s *slots) { s.reserve(2); s.use(); s.use() }, func(s *slots) { s.handlerDone(false) }},
			{"an attempt was reported", func(s *slots) {
				for s.held.Load() < int64(s.maxHeld-2) {
					s.reserve(2)
					s.use()
					s.use()
					s.handlerDone(false)
					s.handlerDone(false) // two more attempts being reported
				}
				s.reserve(2)
				s.use()
				s.use()
				s.handlerDone(false) // one slot free, but as many held as allowed
			}, func(s *slots) { s.reported() }},
			{"a claim left slots over", func(s *slots) { s.reserve(2); s.use() }, func(s *slots) { s.unreserve(1) }},
			{"the local queue grew", func(s *slots) { s.reserve(2); s.use(); s.use() }, func(s *slots) { s.setQueueRoom(2) }},
		} {
			s := newSlots(2)
			c.fill(s)
			if s.free() != 0 {
				t.Fatalf("%s: %d free before; the case needs none", c.name, s.free())
			}
			select {
			case <-s.freed: // from the fill
			default:
			}
			c.free(s)
			select {
			case <-s.freed:
			default:
				t.Fatalf("%s: no signal", c.name)
			}
			if s.free() <= 0 {
				t.Fatalf("%s: signalled, but %d free", c.name, s.free())
			}
		}
	})

	t.Run("a job waiting for a handler gives up when its context ends", func(t *testing.T) {
		s := newSlots(2)
		s.reserve(2)
		for range 2 {
			s.use()
			if !s.startHandler(context.Background()) {
				t.Fatal("startHandler with a free token said false")
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		gave := make(chan bool)
		go func() { gave <- s.startHandler(ctx) }()
		cancel()
		if <-gave {
			t.Fatal("a waiting job's handler started with its context ended and no token free")
		}
		if n := s.handlers(); n != 2 {
			t.Fatalf("%d handlers running, want 2", n)
		}
		s.handlerDone(true)
		if s.startHandler(ctx) {
			t.Fatal("a job whose context had ended started its handler")
		}
		if !s.startHandler(context.Background()) {
			t.Fatal("the freed token was not there for the next job")
		}
	})

	t.Run("under concurrency", func(t *testing.T) {
		const capacity, jobs = 3, 20000
		s := newSlots(capacity)
		// The local queue's room changes while jobs run, as Worker.tuneQueue changes it; jobs in
		// hand never exceed the slots and the largest room.
		check := func(when string) {
			if a, h, r := s.active.Load(), s.held.Load(), s.reserved.Load(); a > 2*capacity || h > int64(s.maxHeld) || a < 0 || h < 0 || r < 0 {
				t.Errorf("%s: active %d (at most %d), held %d (at most %d), reserved %d", when, a, 2*capacity, h, s.maxHeld, r)
			}
			if n := s.handlers(); n > capacity {
				t.Errorf("%s: %d handlers running, capacity %d", when, n, capacity)
			}
		}
		var started, outstanding atomic.Int64
		var wg sync.WaitGroup
		quiet := make(chan struct{}, 1) // the last outstanding job was reported
		var run func()
		// take reserves room and starts jobs in some of it, as a claim does: the claim loop, and
		// the completer from the goroutine of a job whose handler has returned.
		take := func(want int) int {
			n := s.reserve(want)
			check("after reserve")
			k := rand.IntN(n + 1)
			for range k {
				s.use()
				started.Add(1)
				outstanding.Add(1)
				wg.Add(1)
				go run()
			}
			s.unreserve(n - k)
			check("after unreserve")
			return n
		}
		var peak atomic.Int64 // the most handlers seen running at once
		run = func() {
			defer wg.Done()
			ran := s.startHandler(context.Background())
			if !ran {
				t.Error("startHandler with a live context said false")
			}
			if n := int64(s.handlers()); n > peak.Load() {
				peak.Store(n)
			}
			check("handler running")
			runtime.Gosched() // the handler
			if rand.IntN(8) == 0 {
				s.setQueueRoom(rand.IntN(2) * capacity)
			}
			s.handlerDone(ran)
			check("after handlerDone")
			if rand.IntN(2) == 0 && started.Load() < jobs {
				take(1 + rand.IntN(capacity)) // the report claims for the free slots
			}
			s.reported()
			check("after reported")
			if outstanding.Add(-1) == 0 {
				select {
				case quiet <- struct{}{}:
				default:
				}
			}
		}
		// The claim loop: claim while there is room, else wait for some to free.
		for started.Load() < jobs && !t.Failed() {
			if take(1+rand.IntN(capacity)) > 0 {
				continue
			}
			select {
			case <-s.freed:
			case <-quiet:
				// Nothing runs any more, so nothing will free room later: if there is room
				// now, its signal must be waiting.
				if outstanding.Load() == 0 && s.free() > 0 && len(s.freed) == 0 {
					t.Fatalf("lost free signal: %d free, no signal, nothing running", s.free())
				}
			}
		}
		wg.Wait()
		if a, h, r := s.active.Load(), s.held.Load(), s.reserved.Load(); a != 0 || h != 0 || r != 0 || s.inHand() != 0 || s.handlers() != 0 {
			t.Fatalf("after every job was reported: active %d, held %d, reserved %d, in hand %d, handlers %d; want all 0",
				a, h, r, s.inHand(), s.handlers())
		}
		if want := capacity + int(s.queueRoom.Load()); s.free() != want {
			t.Fatalf("after every job was reported: %d free, want %d", s.free(), want)
		}
		t.Logf("at most %d handlers ran at once", peak.Load())
	})
}
