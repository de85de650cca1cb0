package dashboard

import (
	"fmt"
	"strings"
	"testing"
)

// coolDown makes resource cool down for an hour (a job of kind cool, which has a resource
// cooldown, ran on it) and returns that job's ID.
func coolDown(d *daemon, token, resource string) int64 {
	d.t.Helper()
	id := num(d.must(201, token, "POST", "/v1/jobs", map[string]any{"kind": "cool", "resource": resource})["id"])
	c := claim(d, token, "runner-9", "cool", id)
	d.must(200, token, "POST", fmt.Sprintf("/v1/jobs/%d/complete", id), map[string]any{"token": c["token"]})
	return id
}

// TestDashboardKeysWithDotSegments: the browser removes "." and ".." segments from a URL's path
// (%2E ones too) and the server refuses empty ones, so a key such as "evil/../victim" put in an
// API path segment by segment named "victim": clearing its cooldown cleared victim's, and its
// page showed victim's lease. The dashboard escapes keys as the TypeScript client does, and
// reads a key that is only "." or ".." from the listing.
func TestDashboardKeysWithDotSegments(t *testing.T) {
	// Two servers: a key is one resource, so a live lease on it and a cooldown after a job on it
	// cannot both be set up on one store. d holds the resources, ld the leases.
	d, ld := startServer(t, true), startServer(t, true)
	d.must(200, adminToken, "PUT", "/v1/kinds/cool", map[string]any{"policy": "skip", "resource_cooldown_ms": 3600000})
	victimJob := coolDown(d, adminToken, "victim")
	evilJob := coolDown(d, adminToken, "evil/../victim")
	for key, holder := range map[string]string{"victim": "victim-holder", "evil/../victim": "evil-holder", "..": "dotdot-holder",
		"a//b": "slashes-holder", "x/./y": "dot-holder"} {
		ld.must(200, adminToken, "POST", "/v1/locks/acquire", map[string]any{"key": key, "holder": holder, "ttl_ms": 3600000})
	}
	d.must(200, adminToken, "PUT", "/v1/resources/%2E%2E/state", map[string]any{"state": "DOTS"})
	ctx := browser(t, 1280, 900)
	do(t, ctx, signIn(d.url, adminToken))

	// evil/../victim's page shows its own cooldown, started by its own job.
	do(t, ctx, page("#/resources/evil%2F..%2Fvictim", "Resource evil/../victim"), hasText("main", "cooling down until"))
	for job, want := range map[int64]int{evilJob: 1, victimJob: 0} {
		if n := eval[int](t, ctx, fmt.Sprintf(`document.querySelectorAll('dl a[href="#/jobs/%d"]').length`, job)); n != want {
			t.Errorf("evil/../victim's page links job %d (victim's is %d, its own %d) %d times, want %d", job, victimJob, evilJob, n, want)
		}
	}

	// Clear evil/../victim's cooldown from the list: victim keeps its own.
	do(t, ctx, page("#/resources?prefix=evil", "Resources"), hasText("main", "evil/../victim", "cooling down until"),
		click(`button[data-fk="cc:evil/../victim"]`), confirm("checked by hand"),
		hasText("#toast", "Cleared the cooldown of evil/../victim"))
	if _, ok := d.must(200, adminToken, "GET", "/v1/resources/evil%2F../victim", nil)["cooldown"]; ok {
		t.Error("evil/../victim still cools down after its cooldown was cleared")
	}
	if c, ok := d.must(200, adminToken, "GET", "/v1/resources/victim", nil)["cooldown"].(map[string]any); !ok || num(c["job"]) != victimJob {
		t.Errorf("victim's cooldown after clearing evil/../victim's: %v, want the one of job %d", c, victimJob)
	}
	evs := d.must(200, adminToken, "GET", "/v1/events?key=evil/../victim&order=desc&limit=1", nil)["events"].([]any)
	if e := evs[0].(map[string]any); e["kind"] != "resource_cooldown_cleared" || e["reason"] != "checked by hand" {
		t.Errorf("last event of evil/../victim: %v", e)
	}

	// A resource that is only "..": read from the listing.
	do(t, ctx, page("#/resources/..", "Resource .."), until(`document.querySelector('main dl') || !document.querySelector('main .error').hidden`))
	if got := eval[string](t, ctx, `document.querySelector('main').innerText`); !strings.Contains(got, "DOTS") {
		t.Errorf("the page of resource .. does not show its state DOTS:\n%s", got)
	}

	// A job page whose ID is not a number says so rather than asking the browser for another path.
	do(t, ctx, page("#/jobs/..", "Job .."), until(`document.querySelector('main dl') || !document.querySelector('main .error').hidden`))
	if got := eval[string](t, ctx, `document.querySelector('main .error').innerText`); !strings.Contains(got, "a job ID is a positive number") {
		t.Errorf("the page of job ..: %q, want it to say a job ID is a number", got)
	}

	// Each lock's page shows its own lease: once the page shows a lease or none, its holder.
	do(t, ctx, signIn(ld.url, adminToken), hasText("main", "evil/../victim"))
	for _, c := range []struct{ route, key, holder string }{
		{"#/locks/evil%2F..%2Fvictim", "evil/../victim", "evil-holder"},
		{"#/locks/..", "..", "dotdot-holder"},
		{"#/locks/a%2F%2Fb", "a//b", "slashes-holder"},
		{"#/locks/x%2F.%2Fy", "x/./y", "dot-holder"},
		{"#/locks/victim", "victim", "victim-holder"},
	} {
		do(t, ctx, page(c.route, "Lock "+c.key), until(`document.querySelector('main h2') || !document.querySelector('main .error').hidden`))
		if got := eval[string](t, ctx, `(document.querySelector('main dl dd') || document.querySelector('main')).innerText`); got != c.holder {
			t.Errorf("%s shows the lease of %q, want that of %q", c.route, got, c.holder)
		}
	}
}
