package baton

import (
	"sync"
	"time"
)

// fakeTime is a holderClock's time for tests: it stands still until advance moves it, and then
// runs the timers that fell due, in the order of their times, on the caller's goroutine. A test
// of the clock then depends on no scheduler and no wall clock.
type fakeTime struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	t     *fakeTime
	when  time.Time
	f     func()
	armed bool
}

func newFakeTime() *fakeTime { return &fakeTime{now: time.Now()} }

func (t *fakeTime) Now() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.now
}

func (t *fakeTime) AfterFunc(d time.Duration, f func()) clockTimer {
	t.mu.Lock()
	defer t.mu.Unlock()
	ft := &fakeTimer{t: t, when: t.now.Add(d), f: f, armed: true}
	t.timers = append(t.timers, ft)
	return ft
}

func (ft *fakeTimer) Reset(d time.Duration) bool {
	ft.t.mu.Lock()
	defer ft.t.mu.Unlock()
	was := ft.armed
	ft.when, ft.armed = ft.t.now.Add(d), true
	return was
}

func (ft *fakeTimer) Stop() bool {
	ft.t.mu.Lock()
	defer ft.t.mu.Unlock()
	was := ft.armed
	ft.armed = false
	return was
}

// advance moves the time on by d, running each timer that falls due at its own time.
func (t *fakeTime) advance(d time.Duration) {
	t.mu.Lock()
	end := t.now.Add(d)
	t.mu.Unlock()
	for {
		t.mu.Lock()
		var next *fakeTimer
		for _, ft := range t.timers {
			if ft.armed && !ft.when.After(end) && (next == nil || ft.when.Before(next.when)) {
				next = ft
			}
		}
		if next == nil {
			t.now = end
			t.mu.Unlock()
			return
		}
		if next.when.After(t.now) {
			t.now = next.when
		}
		next.armed = false
		t.mu.Unlock()
		next.f()
	}
}
