//go:build chaosclock

package baton

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// The fault harness's holder clock drift (e2e/chaos), in builds with the chaosclock tag only:
// BATON_CHAOS_CLOCK_RATE=R makes every holder clock of the process (a Lease's, a worker's job
// attempt's: the local deadline, stop-grace and keepalive) measure time at R times the real
// rate. A timer of d fires after d/R of real time, so with R < 1 the holder's clock runs slow
// and its local deadline comes late; the clock's readings stay the process's own. R must be
// positive. libfaketime cannot do this: Go reads the clock through the vDSO, not libc.
func init() {
	v := os.Getenv("BATON_CHAOS_CLOCK_RATE")
	if v == "" {
		return
	}
	r, err := strconv.ParseFloat(v, 64)
	if err != nil || r <= 0 {
		fmt.Fprintf(os.Stderr, "baton: BATON_CHAOS_CLOCK_RATE=%q: want a positive rate such as 0.99\n", v)
		os.Exit(2)
	}
	defaultClockTime = scaledTime{rate: r}
}

// scaledTime is processTime with its timers stretched by 1/rate.
type scaledTime struct{ rate float64 }

func (s scaledTime) Now() time.Time { return time.Now() }

func (s scaledTime) AfterFunc(d time.Duration, f func()) clockTimer {
	return scaledTimer{time.AfterFunc(s.real(d), f), s}
}

// real is how long a span of d on the holder's clock lasts in real time.
func (s scaledTime) real(d time.Duration) time.Duration {
	return time.Duration(float64(d) / s.rate)
}

type scaledTimer struct {
	t *time.Timer
	s scaledTime
}

func (t scaledTimer) Reset(d time.Duration) bool { return t.t.Reset(t.s.real(d)) }
func (t scaledTimer) Stop() bool                 { return t.t.Stop() }
