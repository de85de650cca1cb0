package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonhq/baton/internal/notify"
)

const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
	// healthInterval: after this long without a notification the LISTEN connection is pinged, so a
	// silently dead TCP connection (no RST after a partition) is replaced within about
	// healthInterval+pingTimeout instead of the kernel's keepalive time.
	healthInterval = 30 * time.Second
	pingTimeout    = 5 * time.Second
	// closeTimeout bounds the polite Terminate sent when a LISTEN connection is dropped.
	closeTimeout = time.Second
)

// listener holds one pool connection in LISTEN on the store's channel and forwards each
// notification's payload (a key) to the hub. The connection is taken out of the pool for good
// (Hijack) whenever it is dropped: a connection still subscribed to the channel must never serve
// other queries.
type listener struct {
	pool      *pgxpool.Pool
	hub       *notify.Hub
	listenSQL string

	cancel context.CancelFunc
	done   chan struct{}

	// For tests: the backend PID of the current LISTEN connection, and how many LISTENs have been
	// established (a reconnect counts once its NotifyAll has been sent).
	pid      atomic.Uint32
	connects atomic.Uint64
}

// startListener establishes LISTEN before it returns, so a release that commits after Open
// returns is never missed, then dispatches in a goroutine until stop.
func startListener(ctx context.Context, pool *pgxpool.Pool, channel string, hub *notify.Hub) (*listener, error) {
	l := &listener{
		pool:      pool,
		hub:       hub,
		listenSQL: "LISTEN " + pgx.Identifier{channel}.Sanitize(),
		done:      make(chan struct{}),
	}
	conn, err := l.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: listen: %w", err)
	}
	l.connects.Add(1)
	runCtx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go l.run(runCtx, conn)
	return l, nil
}

// stop ends the dispatcher and waits until its goroutine has exited and its connection is closed.
func (l *listener) stop() {
	l.cancel()
	<-l.done
}

func (l *listener) connect(ctx context.Context) (*pgxpool.Conn, error) {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, l.listenSQL); err != nil {
		discard(conn)
		return nil, err
	}
	l.pid.Store(conn.Conn().PgConn().PID())
	return conn, nil
}

func (l *listener) run(ctx context.Context, conn *pgxpool.Conn) {
	defer close(l.done)
	for {
		l.dispatch(ctx, conn)
		discard(conn)
		if conn = l.reconnect(ctx); conn == nil {
			return
		}
		// Notifications sent while no connection listened are lost: wake everyone to re-check.
		l.hub.NotifyAll()
		l.connects.Add(1)
	}
}

// reconnect retries with exponential backoff until it has a listening connection, or returns nil
// once ctx ends.
func (l *listener) reconnect(ctx context.Context) *pgxpool.Conn {
	backoff := minBackoff
	for {
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		if conn, err := l.connect(ctx); err == nil {
			return conn
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// dispatch forwards notifications until the connection fails or ctx ends.
func (l *listener) dispatch(ctx context.Context, conn *pgxpool.Conn) {
	for {
		waitCtx, cancel := context.WithTimeout(ctx, healthInterval)
		n, err := conn.Conn().WaitForNotification(waitCtx)
		cancel()
		switch {
		case err == nil:
			if n != nil {
				wakeFromPayload(l.hub, n.Payload)
			}
			continue
		case ctx.Err() != nil:
			return
		case errors.Is(err, context.DeadlineExceeded) && !conn.Conn().IsClosed():
			// A wait that timed out leaves the connection usable; check that the server is there.
			pingCtx, cancel := context.WithTimeout(ctx, pingTimeout)
			err = conn.Ping(pingCtx)
			cancel()
			if err == nil {
				continue
			}
		}
		return
	}
}

// discard takes conn out of the pool and closes it.
func discard(conn *pgxpool.Conn) {
	c := conn.Hijack()
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = c.Close(ctx) // the connection is being dropped; a failed goodbye changes nothing
}
