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

// Trees through the client: an admin sets, lists, gets and deletes them, odd prefixes included;
// the server's refusals come back as the store's errors: a tree in use as *store.TreeInUseError,
// a refusal by a related key as *store.LockHeldError naming it, a bad prefix as an invalid
// argument, a writer's set as ErrForbidden.
func TestTreesThroughTheClient(t *testing.T) {
	b := newBackend(t, backendOptions{auth: true})
	ctx := testContext(t)
	admin := b.open(t, client.Config{Token: adminToken})
	writer := b.open(t, client.Config{Token: writeToken})
	if _, err := writer.SetTree(ctx, &store.SetTreeParams{Prefix: "cluster/"}); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("SetTree with a write token: %v; want ErrForbidden", err)
	}
	odd := "sp ace/q?u#e%ry/ü/../.bin/"
	for _, prefix := range []string{"cluster/", odd} {
		tr, err := admin.SetTree(ctx, &store.SetTreeParams{Prefix: prefix, Actor: "ignored with auth"})
		if err != nil || tr.Prefix != prefix || tr.Root != store.TreeRoot(prefix) || tr.SetAt.IsZero() {
			t.Fatalf("SetTree(%q) = %+v, %v", prefix, tr, err)
		}
		got, err := writer.Tree(ctx, prefix)
		if err != nil || got.Prefix != prefix || !got.SetAt.Equal(tr.SetAt) {
			t.Fatalf("Tree(%q) = %+v, %v; want %+v", prefix, got, err, tr)
		}
	}
	if _, err := writer.Tree(ctx, "nope/"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Tree of no tree: %v; want ErrNotFound", err)
	}
	page, err := writer.Trees(ctx, &store.TreesParams{Limit: 1})
	if err != nil || len(page) != 1 || page[0].Prefix != "cluster/" {
		t.Fatalf("first page: %+v, %v", page, err)
	}
	page, err = writer.Trees(ctx, &store.TreesParams{After: page[0].Prefix})
	if err != nil || len(page) != 1 || page[0].Prefix != odd {
		t.Fatalf("second page: %+v, %v; want %q", page, err, odd)
	}

	_, err = admin.SetTree(ctx, &store.SetTreeParams{Prefix: "cluster/eu/"})
	var inv *store.InvalidArgumentError
	if !errors.As(err, &inv) || inv.Field != "prefix" {
		t.Fatalf("an overlapping tree: %v; want invalid prefix", err)
	}

	held, err := writer.Acquire(ctx, &store.AcquireParams{Key: "cluster/eu-1", LeaseID: "up", Holder: "upgrade", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	_, err = writer.Acquire(ctx, &store.AcquireParams{Key: "cluster/eu-1/node/a", LeaseID: "rem", Holder: "remediate", TTL: time.Minute})
	var he *store.LockHeldError
	if !errors.As(err, &he) || he.Key != "cluster/eu-1/node/a" || he.Related != "cluster/eu-1" || he.Holder != "upgrade" || he.Token != held.Token {
		t.Fatalf("a child of a held key: %v (%+v); want LockHeldError naming related cluster/eu-1", err, he)
	}
	err = admin.DeleteTree(ctx, &store.DeleteTreeParams{Prefix: "cluster/"})
	var use *store.TreeInUseError
	if !errors.As(err, &use) || !errors.Is(err, store.ErrTreeInUse) || use.Prefix != "cluster/" || use.Key != "cluster/eu-1" || use.What != "lease" {
		t.Fatalf("DeleteTree in use: %v (%+v); want TreeInUseError naming cluster/eu-1, a lease", err, use)
	}
	if _, err := writer.Release(ctx, &store.ReleaseParams{Key: held.Key, LeaseID: held.ID}); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"cluster/", odd} {
		if err := admin.DeleteTree(ctx, &store.DeleteTreeParams{Prefix: prefix}); err != nil {
			t.Fatalf("DeleteTree(%q): %v", prefix, err)
		}
		if err := admin.DeleteTree(ctx, &store.DeleteTreeParams{Prefix: prefix}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("DeleteTree(%q) again: %v; want ErrNotFound", prefix, err)
		}
	}
	evs, err := admin.Events(ctx, &store.EventsParams{Key: "cluster/", Limit: 10})
	if err != nil || len(evs) != 2 || evs[0].Kind != store.EventTreeSet || evs[0].Actor != "ops" || evs[1].Kind != store.EventTreeDelete {
		t.Fatalf("events of cluster/: %+v, %v; want tree_set and tree_delete by ops", evs, err)
	}
}

// A server whose store keeps no trees: every call is *store.UnsupportedError naming trees.
func TestTreesUnsupportedThroughTheClient(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Store: struct{ store.Store }{st}, StoreName: "redis",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close(); st.Close() })
	s, err := client.NewStore(client.Config{BaseURL: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := testContext(t)
	_, setErr := s.SetTree(ctx, &store.SetTreeParams{Prefix: "t/"})
	_, listErr := s.Trees(ctx, &store.TreesParams{})
	_, getErr := s.Tree(ctx, "t/")
	for _, err := range []error{setErr, listErr, getErr, s.DeleteTree(ctx, &store.DeleteTreeParams{Prefix: "t/"})} {
		var u *store.UnsupportedError
		if !errors.As(err, &u) || u.Feature != "trees" || u.Store != "redis" {
			t.Fatalf("a tree call to a server without trees: %v; want UnsupportedError naming redis and trees", err)
		}
	}
}

// Bad prefixes are refused before any request, naming prefix.
func TestTreesClientChecksPrefix(t *testing.T) {
	s, err := client.NewStore(client.Config{BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for _, prefix := range []string{"", "cluster", "/", "a//", "a\nb/"} {
		_, setErr := s.SetTree(ctx, &store.SetTreeParams{Prefix: prefix})
		_, getErr := s.Tree(ctx, prefix)
		for _, err := range []error{setErr, getErr, s.DeleteTree(ctx, &store.DeleteTreeParams{Prefix: prefix})} {
			var inv *store.InvalidArgumentError
			if !errors.As(err, &inv) || inv.Field != "prefix" {
				t.Fatalf("prefix %q: %v; want invalid prefix", prefix, err)
			}
		}
	}
}
