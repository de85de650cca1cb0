package cli

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonhq/baton/internal/batontest"
)

// Two idle servers on one PostgreSQL schema: one holds the maintenance lease and renews it, the
// other polls for it and is refused. Neither draws fencing tokens while nothing changes hands
// (a renewal keeps its token; a refused attempt must not burn one either).
func TestIdleServersDrawNoTokens(t *testing.T) {
	conn, schema := batontest.PostgresSchema(t)
	bin := batontest.Build(t, "")
	u, err := url.Parse(batontest.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("baton_schema", schema)
	u.RawQuery = q.Encode()
	// A short reap interval: the leader does its periodic work several times while watched.
	for range 2 {
		batontest.Serve(t, bin, nil, "--store", u.String(), "--reap-interval", "200ms")
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	seq := "SELECT last_value FROM " + pgx.Identifier{schema, "token_seq"}.Sanitize()
	lease := "SELECT token, expires_at FROM " + pgx.Identifier{schema, "leases"}.Sanitize() + " WHERE key = 'baton/maintenance'"
	var before, after, token, tokenAfter int64
	var exp, expAfter time.Time
	for conn.QueryRow(ctx, lease).Scan(&token, &exp) != nil { // until a server leads
		if ctx.Err() != nil {
			t.Fatalf("no server took the maintenance lease in %s (hung)", hangGuard)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := conn.QueryRow(ctx, seq).Scan(&before); err != nil {
		t.Fatal(err)
	}
	// Watched until the leader has renewed its lease (every TTL/3, 5 s) and for at least 5 s:
	// several maintenance periods and poll intervals (1 s) of the standby. The 5 s are a
	// schedule (what is watched), not a bound: a loaded machine only makes the watch longer.
	watched := time.Now()
	for {
		if err := conn.QueryRow(ctx, lease).Scan(&tokenAfter, &expAfter); err != nil {
			t.Fatalf("watching the maintenance lease (renewed yet: %v, expiry %s): %v", expAfter.After(exp), expAfter, err)
		}
		if expAfter.After(exp) && time.Since(watched) >= 5*time.Second {
			break
		}
		time.Sleep(200 * time.Millisecond) // watching a process from outside: no signal to wait on
	}
	if err := conn.QueryRow(ctx, seq).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != before || tokenAfter != token {
		t.Fatalf("idle servers drew tokens: sequence %d -> %d, maintenance lease token %d -> %d", before, after, token, tokenAfter)
	}
}
