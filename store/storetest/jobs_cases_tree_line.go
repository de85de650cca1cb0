package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// testJobTreeSeen: the line of a tree key lists the live holders of its ancestors and its
// descendants (ResourceLine.Related), never those of siblings or its own, and the explanation of
// a job that waits names the related holder it waits for: the upgrade of the cluster that a node
// remediation waits behind.
func testJobTreeSeen(t *testing.T, h JobHarness) {
	e := newJobEnv(t, h, treeKinds...)
	ls := treeJobStore(t, e, "cv/")
	lr, ok := ls.(store.LineReader)
	requireNotApplicable(t, ok, "the store keeps no line")
	up := e.submit(store.SubmitParams{Kind: "upgrade", Resource: "cv/eu-1"})
	run := e.claimedIDs(up)
	reader, err := ls.Acquire(e.ctx, &store.AcquireParams{Key: "cv/eu-2/node/a", LeaseID: "reader", Holder: "reader",
		TTL: time.Minute, Shared: true})
	if err != nil {
		t.Fatalf("a shared lease on another cluster's node: %v", err)
	}
	writer, err := ls.Acquire(e.ctx, &store.AcquireParams{Key: "cv/eu-4/node/b", LeaseID: "writer", Holder: "writer", TTL: time.Minute})
	if err != nil {
		t.Fatalf("an exclusive lease on another cluster's node: %v", err)
	}
	rem := e.submit(store.SubmitParams{Kind: "remediate", Resource: "cv/eu-1/node/a"})
	e.claimNone("the upgrade of the node's cluster runs", treeKindNames...)

	upHold := fmt.Sprintf("cv/eu-1 X %s token %d", store.JobLeaseID(up.ID), run[0].Token)
	readHold := fmt.Sprintf("cv/eu-2/node/a S reader token %d", reader.Token)
	writeHold := fmt.Sprintf("cv/eu-4/node/b X writer token %d", writer.Token)
	related := func(key string, want ...string) {
		t.Helper()
		v, err := lr.ResourceLine(e.ctx, key, 10)
		if err != nil {
			t.Fatalf("ResourceLine(%q): %v", key, err)
		}
		var got []string
		for _, l := range v.Related {
			id := l.ID
			if l.Holder == "reader" || l.Holder == "writer" {
				id = l.Holder // a lease ID is shown only to its owner and to an admin
			}
			got = append(got, fmt.Sprintf("%s %s %s token %d", l.Key, modeName(l.Shared), id, l.Token))
			if !l.ExpiresAt.After(l.AcquiredAt) {
				t.Fatalf("ResourceLine(%q): related holder %+v has no lease time", key, l)
			}
		}
		if wantTree := map[bool]string{true: "cv/"}[strings.HasPrefix(key+"/", "cv/")]; v.Tree != wantTree {
			t.Fatalf("ResourceLine(%q).Tree = %q; want %q", key, v.Tree, wantTree)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("ResourceLine(%q).Related:\n%s\nwant:\n%s", key, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	related("cv/eu-1/node/a", upHold)          // an ancestor
	related("cv/eu-1/node", upHold)            // an ancestor, the key itself never written
	related("cv", upHold, readHold, writeHold) // the root sees every holder below it, in token order
	related("cv/eu-4", writeHold)
	related("cv/eu-2", readHold) // a descendant; not its sibling cv/eu-1
	related("cv/eu-1")           // its own holder is not related
	related("cv/eu-3/node/a")    // a cousin
	related("cvx/eu-1")          // a key in no tree
	if reader.Token < run[0].Token || writer.Token < reader.Token {
		t.Fatalf("tokens: upgrade %d, then leases %d and %d: not in grant order", run[0].Token, reader.Token, writer.Token)
	}

	ex, err := baton.ExplainJob(e.ctx, e.s, rem.ID)
	if err != nil {
		t.Fatalf("ExplainJob(%d): %v", rem.ID, err)
	}
	found := false
	for _, r := range ex.Reasons {
		if r.Code == baton.WaitHeld && r.Resource == "cv/eu-1" && r.Job == up.ID && r.Token == run[0].Token {
			found = true
		}
		if r.Resource == "cv/eu-2/node/a" {
			t.Fatalf("explanation of job %d names an unrelated holder: %s", rem.ID, r.Message)
		}
	}
	if !found {
		t.Fatalf("explanation of job %d waiting behind the upgrade of its cluster: %+v; want held on cv/eu-1 by job %d", rem.ID, ex.Reasons, up.ID)
	}

	e.complete(run[0])
	got := e.claimedIDs(rem)
	related("cv/eu-1", fmt.Sprintf("cv/eu-1/node/a X %s token %d", store.JobLeaseID(rem.ID), got[0].Token))
	e.complete(got[0])
	if _, err := ls.Release(e.ctx, &store.ReleaseParams{Key: reader.Key, LeaseID: reader.ID, Holds: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := ls.Release(e.ctx, &store.ReleaseParams{Key: writer.Key, LeaseID: writer.ID}); err != nil {
		t.Fatal(err)
	}
	related("cv")
}
