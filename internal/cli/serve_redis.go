package cli

import (
	"context"
	"fmt"
	"log/slog"

	goredis "github.com/redis/go-redis/v9"
)

// redisLogger routes go-redis's own log lines ("connection pool: failed to dial after 5
// attempts", printed by default to stderr before the error they lead to) to serve's logger at
// debug level: the error that `baton serve` reports says it once, and --log-format applies.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "go-redis", "msg", fmt.Sprintf(format, v...))
}

// quietRedis installs redisLogger for the process (go-redis has one logger per process).
func quietRedis(log *slog.Logger) { goredis.SetLogger(redisLogger{log}) }
