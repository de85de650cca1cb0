package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/testredis"
	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
	batonredis "github.com/batonhq/baton/store/redis"
)

// Principals of the ownership tests: two writers, a reader and an admin.
const (
	aliceToken = "alice-secret"
	bobToken   = "bob-secret"
)

func ownersAuth(t *testing.T) *server.Auth {
	t.Helper()
	a, err := server.ParseAuth(strings.NewReader("alice write " + server.HashToken(aliceToken) +
		"\nbob write " + server.HashToken(bobToken) + "\nreader read " + server.HashToken(readToken) +
		"\nops admin " + server.HashToken(adminToken) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// serveWithAuth serves st with auth (or without, if auth is nil), checking every answer against
// the OpenAPI document.
func serveWithAuth(t *testing.T, st store.Store, auth *server.Auth) *fixture {
	t.Helper()
	srv, err := server.New(server.Config{Store: st, Auth: auth, MaxWait: 5 * time.Second, Version: "test", StoreName: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(validating(t, srv.Handler()))
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
	})
	return &fixture{t: t, url: ts.URL}
}

func openRedisStore(t *testing.T) store.Store {
	t.Helper()
	st, err := batonredis.Open(context.Background(), batonredis.Config{Addr: testredis.Start(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// ownerStores are the stores the ownership rules are checked on: both SQL stores and a
// lease-only one.
var ownerStores = map[string]func(*testing.T) store.Store{"sqlite": openSQLiteStore, "postgres": openPostgres, "redis": openRedisStore}

// wantForbidden fails unless r is a 403 whose rule names ownership or the reserved prefix.
func wantForbidden(t *testing.T, what string, r response, rule string) {
	t.Helper()
	got, _ := r.body["rule"].(string)
	if r.status != http.StatusForbidden || r.body["code"] != "forbidden" || !strings.Contains(got, rule) {
		t.Fatalf("%s: %d %s; want 403 forbidden with a rule about %q", what, r.status, r.raw, rule)
	}
}

// With auth, a lease belongs to the principal that took it: another writer cannot re-acquire
// it through its holder string, renew it or release it, even with its ID, and none of those
// attempts changes it. Readers do not see lease IDs; the owner and admins do. The audit log
// names the principal of each change.
func TestLeaseBelongsToItsPrincipal(t *testing.T) {
	for name, open := range ownerStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := open(t)
			f := serveWithAuth(t, st, ownersAuth(t))
			acq := f.post("/v1/locks/acquire", aliceToken, `{"key":"deploy/api","holder":"deployer","ttl_ms":60000}`)
			if acq.status != http.StatusOK {
				t.Fatalf("alice's acquire: %d %s", acq.status, acq.raw)
			}
			lease := acq.body["lease"].(map[string]any)
			id, expires := lease["lease_id"].(string), lease["expires_at"]
			if id == "" || lease["owner"] != "alice" {
				t.Fatalf("alice's acquire answered %s; want her lease ID and owner alice", acq.raw)
			}
			unchanged := func(after string) {
				t.Helper()
				g := f.do("GET", "/v1/locks/deploy/api", adminToken, "", "")
				l, _ := g.body["lease"].(map[string]any)
				if g.status != http.StatusOK || l["lease_id"] != id || l["expires_at"] != expires || l["owner"] != "alice" {
					t.Fatalf("after %s: %d %s; want alice's lease %s unchanged (expiring %v)", after, g.status, g.raw, id, expires)
				}
			}
			// The holder string is public (GET shows it): bob re-acquiring through it gets no lease.
			r := f.post("/v1/locks/acquire", bobToken, `{"key":"deploy/api","holder":"deployer","ttl_ms":1000}`)
			wantForbidden(t, "bob's re-acquire with alice's holder", r, "belongs to the principal that took it")
			if strings.Contains(r.raw, id) {
				t.Fatalf("the refusal leaked alice's lease ID: %s", r.raw)
			}
			unchanged("bob's re-acquire")
			// Waiting does not help either.
			r = f.post("/v1/locks/acquire", bobToken, `{"key":"deploy/api","holder":"deployer","ttl_ms":1000,"wait_ms":200}`)
			wantForbidden(t, "bob's waiting re-acquire with alice's holder", r, "belongs to the principal that took it")
			unchanged("bob's waiting re-acquire")
			// With the ID (leaked, or guessed), bob can neither renew nor release it.
			r = f.post("/v1/locks/renew", bobToken, `{"key":"deploy/api","lease_id":"`+id+`","ttl_ms":1000}`)
			wantForbidden(t, "bob's renewal of alice's lease", r, "belongs to the principal that took it")
			unchanged("bob's renewal")
			r = f.post("/v1/locks/renew-batch", bobToken, `{"leases":[{"key":"deploy/api","lease_id":"`+id+`","ttl_ms":1000}]}`)
			res, _ := r.body["results"].([]any)
			if r.status != http.StatusOK || len(res) != 1 || !strings.Contains(fmt.Sprint(res[0]), "belongs to the principal that took it") {
				t.Fatalf("bob's batch renewal of alice's lease: %d %s; want a 403 problem for it", r.status, r.raw)
			}
			unchanged("bob's batch renewal")
			r = f.post("/v1/locks/release", bobToken, `{"key":"deploy/api","lease_id":"`+id+`"}`)
			wantForbidden(t, "bob's release of alice's lease", r, "belongs to the principal that took it")
			unchanged("bob's release")
			// An admin may not renew it either (it is not the admin's), only force-release it.
			r = f.post("/v1/locks/renew", adminToken, `{"key":"deploy/api","lease_id":"`+id+`","ttl_ms":1000}`)
			wantForbidden(t, "the admin's renewal of alice's lease", r, "belongs to the principal that took it")
			unchanged("the admin's renewal")
			// Who sees the lease ID: the owner and admins, not other writers nor readers.
			for _, c := range []struct {
				token string
				sees  bool
			}{{aliceToken, true}, {adminToken, true}, {bobToken, false}, {readToken, false}} {
				g := f.do("GET", "/v1/locks/deploy/api", c.token, "", "")
				l := f.do("GET", "/v1/locks?prefix=deploy/", c.token, "", "")
				if g.status != http.StatusOK || l.status != http.StatusOK || strings.Contains(g.raw, id) != c.sees || strings.Contains(l.raw, id) != c.sees {
					t.Fatalf("token %q: get %d %s, list %d %s; want the lease ID shown: %v", c.token, g.status, g.raw, l.status, l.raw, c.sees)
				}
			}
			// The owner renews, re-acquires (the same lease) and releases.
			if r := f.post("/v1/locks/renew", aliceToken, `{"key":"deploy/api","lease_id":"`+id+`","ttl_ms":60000}`); r.status != http.StatusOK {
				t.Fatalf("alice's renewal: %d %s", r.status, r.raw)
			}
			if r := f.post("/v1/locks/acquire", aliceToken, `{"key":"deploy/api","holder":"deployer","ttl_ms":60000}`); r.status != http.StatusOK ||
				r.body["lease"].(map[string]any)["lease_id"] != id {
				t.Fatalf("alice's re-acquire: %d %s; want her lease %s", r.status, r.raw, id)
			}
			if r := f.post("/v1/locks/release", aliceToken, `{"key":"deploy/api","lease_id":"`+id+`"}`); r.status != http.StatusOK || r.body["released"] != true {
				t.Fatalf("alice's release: %d %s", r.status, r.raw)
			}
			if !st.Capabilities().Audit {
				return
			}
			ev := f.do("GET", "/v1/events?key=deploy/api&order=asc", adminToken, "", "")
			var got []string
			for _, e := range ev.body["events"].([]any) {
				m := e.(map[string]any)
				got = append(got, fmt.Sprintf("%v:%v:%v", m["kind"], m["holder"], m["principal"]))
			}
			// bob's waiting acquire joined the key's line under his own principal before it was
			// refused (and left it).
			if want := "[acquire:deployer:alice ticket_enqueue:deployer:bob release:deployer:alice]"; fmt.Sprint(got) != want {
				t.Fatalf("audit log of deploy/api = %v; want %s (the principal apart from the holder)", got, want)
			}
		})
	}
}

// With auth, a job attempt belongs to the principal that claimed it: another writer cannot
// heartbeat, complete or fail it with its token (which readers see), and the job keeps running.
func TestJobAttemptBelongsToItsPrincipal(t *testing.T) {
	for name, open := range map[string]func(*testing.T) store.Store{"sqlite": openSQLiteStore, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := serveWithAuth(t, open(t), ownersAuth(t))
			if r := f.do("PUT", "/v1/kinds/own.apply", adminToken, "application/json", `{}`); r.status != http.StatusOK {
				t.Fatalf("kind: %d %s", r.status, r.raw)
			}
			if r := f.post("/v1/jobs", bobToken, `{"kind":"own.apply","resource":"ws/1"}`); r.status != http.StatusCreated {
				t.Fatalf("submit: %d %s", r.status, r.raw)
			}
			c := f.post("/v1/jobs/claim", aliceToken, `{"worker":"w-1","kinds":["own.apply"]}`)
			jobs, _ := c.body["jobs"].([]any)
			if c.status != http.StatusOK || len(jobs) != 1 {
				t.Fatalf("alice's claim: %d %s", c.status, c.raw)
			}
			j := jobs[0].(map[string]any)
			if j["owner"] != "alice" {
				t.Fatalf("claimed job %s; want owner alice", c.raw)
			}
			path := fmt.Sprintf("/v1/jobs/%v", j["id"])
			tok := fmt.Sprintf(`"token":%v`, j["token"])
			running := func(after string) {
				t.Helper()
				g := f.do("GET", path, readToken, "", "")
				if g.status != http.StatusOK || g.body["state"] != "running" || g.body["lease_expires_at"] != j["lease_expires_at"] {
					t.Fatalf("after %s: %d %s; want alice's attempt running, unchanged", after, g.status, g.raw)
				}
			}
			for _, who := range []string{bobToken, adminToken} {
				wantForbidden(t, "a heartbeat of alice's attempt", f.post(path+"/heartbeat", who, `{`+tok+`,"ttl_ms":1000}`), "belongs to the principal that took it")
				running("another principal's heartbeat")
				wantForbidden(t, "a completion of alice's attempt", f.post(path+"/complete", who, `{`+tok+`}`), "belongs to the principal that took it")
				running("another principal's completion")
				wantForbidden(t, "a failure of alice's attempt", f.post(path+"/fail", who, `{`+tok+`,"permanent":true}`), "belongs to the principal that took it")
				running("another principal's failure")
			}
			if r := f.post(path+"/complete", aliceToken, `{`+tok+`}`); r.status != http.StatusOK || r.body["state"] != "succeeded" {
				t.Fatalf("alice's completion: %d %s", r.status, r.raw)
			}
			ev := f.do("GET", "/v1/events?key=ws/1&order=asc", adminToken, "", "")
			var got []string
			for _, e := range ev.body["events"].([]any) {
				m := e.(map[string]any)
				got = append(got, fmt.Sprintf("%v:%v", m["kind"], m["principal"]))
			}
			if want := "[job_claim:alice job_complete:alice]"; fmt.Sprint(got) != want {
				t.Fatalf("audit log of ws/1 = %v; want %s", got, want)
			}
		})
	}
}

// The server's own keys (its maintenance lease, baton/maintenance) are reserved: no caller may
// take, renew, release or rest them or put jobs on them; an admin may only force-release them.
func TestReservedKeys(t *testing.T) {
	for _, auth := range []bool{true, false} {
		t.Run(fmt.Sprintf("auth=%v", auth), func(t *testing.T) {
			var a *server.Auth
			if auth {
				a = ownersAuth(t)
			}
			st := openSQLiteStore(t)
			f := serveWithAuth(t, st, a)
			// The server's maintenance lease, as a server on this store holds it.
			held, err := st.Acquire(context.Background(), &store.AcquireParams{Key: "baton/maintenance", LeaseID: "srv", Holder: "srv", TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			for _, token := range []string{aliceToken, adminToken} {
				for _, c := range []struct{ path, body string }{
					{"/v1/locks/acquire", `{"key":"baton/maintenance","ttl_ms":60000}`},
					{"/v1/locks/acquire", `{"key":"baton/other"}`},
					{"/v1/locks/renew", `{"key":"baton/maintenance","lease_id":"srv"}`},
					{"/v1/locks/renew-batch", `{"leases":[{"key":"baton/maintenance","lease_id":"srv"}]}`},
					{"/v1/locks/release", `{"key":"baton/maintenance","lease_id":"srv"}`},
					{"/v1/jobs", `{"kind":"k","resource":"baton/maintenance"}`},
				} {
					wantForbidden(t, c.path+" "+c.body, f.post(c.path, token, c.body), "must not start with baton/")
				}
			}
			if l, err := st.Get(context.Background(), "baton/maintenance"); err != nil || l.ID != held.ID || !l.ExpiresAt.Equal(held.ExpiresAt) {
				t.Fatalf("the maintenance lease after the refused calls: %+v, %v; want it unchanged", l, err)
			}
			wantForbidden(t, "clear-rest of a reserved key", f.post("/v1/locks/clear-rest", adminToken, `{"key":"baton/maintenance","reason":"x"}`), "must not start with baton/")
			// An admin may force-release it (a stuck server); a writer may not.
			if auth {
				if r := f.post("/v1/locks/force-release", aliceToken, `{"key":"baton/maintenance","reason":"x"}`); r.status != http.StatusForbidden {
					t.Fatalf("a writer's force-release: %d %s", r.status, r.raw)
				}
			}
			if r := f.post("/v1/locks/force-release", adminToken, `{"key":"baton/maintenance","reason":"stuck server"}`); r.status != http.StatusOK {
				t.Fatalf("the admin's force-release: %d %s", r.status, r.raw)
			}
		})
	}
}

// Without auth, nothing is owned: any caller may renew or release a lease with its ID, as
// before (every caller is the same anonymous admin).
func TestWithoutAuthNothingIsOwned(t *testing.T) {
	f := serveWithAuth(t, openSQLiteStore(t), nil)
	acq := f.post("/v1/locks/acquire", "", `{"key":"k","holder":"h"}`)
	id := acq.body["lease"].(map[string]any)["lease_id"].(string)
	if r := f.post("/v1/locks/acquire", "", `{"key":"k","holder":"h"}`); r.status != http.StatusOK || r.body["lease"].(map[string]any)["lease_id"] != id {
		t.Fatalf("re-acquire by holder without auth: %d %s", r.status, r.raw)
	}
	if r := f.post("/v1/locks/release", "", `{"key":"k","lease_id":"`+id+`"}`); r.status != http.StatusOK {
		t.Fatalf("release without auth: %d %s", r.status, r.raw)
	}
}
