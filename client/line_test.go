package client_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/sqlite"
)

// ResourceLine through HTTP: at most limit tickets from the front, and lease IDs only for whom
// may see them (an admin, the owner).
func TestResourceLineLimitAndLeaseIDs(t *testing.T) {
	b := newJobBackend(t, true)
	ctx := testContext(t)
	admin := b.open(t, client.Config{Token: adminToken})
	writer := b.open(t, client.Config{Token: writeToken})
	reader := b.open(t, client.Config{Token: readToken})
	held, err := writer.Acquire(ctx, &store.AcquireParams{Key: "line/c", LeaseID: "held", Holder: "ops", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// Two waiting requests, each refused once with its ticket kept.
	for _, id := range []string{"w1", "w2"} {
		for {
			wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			_, err := admin.Acquire(wctx, &store.AcquireParams{Key: "line/c", LeaseID: id, Holder: "h-" + id, TTL: time.Minute, Wait: true})
			cancel()
			if errors.Is(err, store.ErrLockHeld) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("waiting acquire as %s: %v", id, err)
			}
		}
	}
	l, err := admin.ResourceLine(ctx, "line/c", 1)
	if err != nil || len(l.Tickets) != 1 || l.Tickets[0].LeaseID != "w1" || l.Holder == nil || l.Holder.ID != held.ID {
		t.Fatalf("ResourceLine(line/c, 1) as admin: %+v, %v; want the holder's lease ID and only w1", l, err)
	}
	l, err = reader.ResourceLine(ctx, "line/c", 10)
	if err != nil || len(l.Tickets) != 2 || l.Tickets[0].LeaseID != "" || l.Tickets[1].Holder != "h-w2" || l.Holder.ID != "" || l.Holder.Token != held.Token {
		t.Fatalf("ResourceLine(line/c) as reader: %+v, %v; want both tickets and the holder without lease IDs", l, err)
	}
	if l, err = writer.ResourceLine(ctx, "line/c", 10); err != nil || l.Holder.ID != held.ID || l.Tickets[0].LeaseID != "" {
		t.Fatalf("ResourceLine(line/c) as the holder's owner: %+v, %v; want its own lease ID only", l, err)
	}
	if _, err := reader.ResourceLine(ctx, "line/c", store.MaxListLimit+1); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("ResourceLine with limit %d: %v; want ErrInvalidArgument", store.MaxListLimit+1, err)
	}
}

// noLine is the SQLite store without a line: no ResourceLine, and Capabilities say so.
type noLine struct{ *sqlite.Store }

func (noLine) ResourceLine() {}

func (n noLine) Capabilities() store.Capabilities {
	c := n.Store.Capabilities()
	c.Line = false
	return c
}

// A server whose store keeps no line answers ResourceLine with ErrNoLine, never an empty line.
func TestResourceLineWithoutALine(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Store: noLine{st}, Version: "test", StoreName: "sqlite",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
		st.Close()
	})
	c := (&jobBackend{url: ts.URL}).open(t, client.Config{})
	ctx := testContext(t)
	if _, err := c.SetResourceState(ctx, &store.SetResourceStateParams{Key: "r", State: "S"}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"r", "nothing"} {
		if l, err := c.ResourceLine(ctx, key, 10); !errors.Is(err, client.ErrNoLine) {
			t.Fatalf("ResourceLine(%s) without a line: %+v, %v; want ErrNoLine", key, l, err)
		}
	}
}
