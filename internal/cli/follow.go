package cli

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// interruptContext is the context of a command that runs until interrupted (events --follow,
// locks list --watch): it ends at SIGINT or SIGTERM. Tests replace it.
var interruptContext = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// defaultPollInterval is how often --follow and --watch ask the server again.
const defaultPollInterval = time.Second

// pollFlag adds --interval to a following command.
func pollFlag(fs *flag.FlagSet) *time.Duration {
	return fs.Duration("interval", defaultPollInterval, "with --follow or --watch: how often to ask the server, 100ms to 1h")
}

func checkInterval(c *command, d time.Duration) (int, bool) {
	if d < 100*time.Millisecond || d > time.Hour {
		return c.usageError("--interval must be between 100ms and 1h (got %s)", d), false
	}
	return 0, true
}

// poll calls f every interval until ctx ends (then returns nil) or f fails.
func poll(ctx context.Context, interval time.Duration, f func(context.Context) error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, requestTimeout)
		err := f(cctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}
