package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// interruptContext is the context of a command that runs until interrupted (events --follow,
// locks list --watch): it ends at SIGINT or SIGTERM. Tests replace it.
var interruptContext = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// defaultPollInterval is how often --follow and --watch ask the server again.
const defaultPollInterval = time.Second

// pollFlag adds --interval to a following command.
func pollFlag(cmd *cobra.Command, p *time.Duration) {
	cmd.Flags().DurationVar(p, "interval", defaultPollInterval, "with --follow or --watch: how often to ask the server, 100ms to 1h")
}

func checkInterval(d time.Duration) error {
	if d < 100*time.Millisecond || d > time.Hour {
		return usagef("--interval must be between 100ms and 1h (got %s)", d)
	}
	return nil
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
