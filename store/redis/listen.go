package redis

import (
	"context"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/notify"
)

// listener holds one Pub/Sub connection to one node and turns its messages into hub wake-ups:
// a message on the released channel names the key; an expired-key event (when the server has
// keyspace notifications for expiry on) names a wake key (or a lease key of the earlier layout),
// mapped back to its lock key.
// go-redis re-establishes a lost Pub/Sub connection and re-subscribes; every subscription
// confirmation after the first ones means messages may have been lost, so every waiter is woken.
type listener struct {
	ps     *goredis.PubSub
	cancel context.CancelFunc
	done   chan struct{}
}

// With strict, Open fails if the subscription is not confirmed; without (a Redlock node that
// may be down), the listener keeps retrying in the background.
func startListener(ctx context.Context, rdb *goredis.Client, n *node, hub *notify.Hub, strict bool) (*listener, error) {
	channels := []string{n.channel}
	if ch, ok := expiredChannel(ctx, rdb); ok {
		channels = append(channels, ch)
		n.events = "1"
	}
	ps := rdb.Subscribe(ctx, channels...)
	// Wait for the confirmations, so that a release after Open returns is seen.
	for range channels {
		if _, err := ps.Receive(ctx); err != nil {
			if !strict {
				break
			}
			_ = ps.Close()
			return nil, err
		}
	}
	lctx, cancel := context.WithCancel(context.Background())
	l := &listener{ps: ps, cancel: cancel, done: make(chan struct{})}
	// A wake key expires with a lease that waiters marked; a lease key of the earlier layout
	// expired with its lease (see scripts.go).
	wakePrefix, leasePrefix := n.wakeKey(""), n.leaseKey("")
	go func() {
		defer close(l.done)
		backoff := 10 * time.Millisecond
		for {
			msg, err := ps.Receive(lctx)
			if lctx.Err() != nil {
				return
			}
			if err != nil {
				// go-redis reconnects on the next Receive; do not spin while the server is down.
				t := time.NewTimer(backoff)
				select {
				case <-lctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
				backoff = min(2*backoff, time.Second)
				continue
			}
			backoff = 10 * time.Millisecond
			switch m := msg.(type) {
			case *goredis.Message:
				if m.Channel == n.channel {
					hub.Notify(m.Payload)
				} else if k, ok := strings.CutPrefix(m.Payload, wakePrefix); ok {
					hub.Notify(k)
				} else if k, ok := strings.CutPrefix(m.Payload, leasePrefix); ok {
					hub.Notify(k)
				}
			case *goredis.Subscription:
				// A re-subscription after a reconnect: releases may have been missed.
				hub.NotifyAll()
			}
		}
	}()
	return l, nil
}

// expiredChannel returns the keyevent channel of expirations on the client's database if the
// server publishes them (notify-keyspace-events contains E and x, or E and A). The store does
// not change the server's configuration; the Locker's poll covers expiry otherwise.
func expiredChannel(ctx context.Context, rdb *goredis.Client) (string, bool) {
	v, err := rdb.ConfigGet(ctx, "notify-keyspace-events").Result()
	if err != nil {
		return "", false
	}
	flags := v["notify-keyspace-events"]
	if !strings.Contains(flags, "E") || !(strings.Contains(flags, "x") || strings.Contains(flags, "A")) {
		return "", false
	}
	return "__keyevent@" + strconv.Itoa(rdb.Options().DB) + "__:expired", true
}

func (l *listener) stop() {
	l.cancel()
	_ = l.ps.Close()
	<-l.done
}
