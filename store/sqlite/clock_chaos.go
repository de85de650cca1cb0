//go:build chaosclock

package sqlite

import (
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

// The fault harness's server clock step (e2e/chaos), in builds with the chaosclock tag only:
// with BATON_CHAOS_CLOCK_STEP=D set (a Go duration, negative for a step back), each SIGUSR1
// moves the clock of every SQLite store of the process (its expiry clock, Config.Now unset) on
// by D, as an NTP step of the machine's wall clock would, and logs "chaosclock: stepped" with
// the total on stderr. libfaketime cannot do this: Go reads the clock through the vDSO, not
// libc.
func init() {
	v := os.Getenv("BATON_CHAOS_CLOCK_STEP")
	if v == "" {
		return
	}
	step, err := time.ParseDuration(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "baton: BATON_CHAOS_CLOCK_STEP=%q: want a duration such as 3s or -3s\n", v)
		os.Exit(2)
	}
	var offset atomic.Int64
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	go func() {
		for range sig {
			total := time.Duration(offset.Add(int64(step)))
			fmt.Fprintf(os.Stderr, "chaosclock: stepped by %s (total %s)\n", step, total)
		}
	}()
	defaultNow = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
}
