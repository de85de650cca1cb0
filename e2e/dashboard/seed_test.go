package dashboard

import "fmt"

// seeded names what seed created.
type seeded struct {
	running, waiting int64 // build jobs on repo/api: the running head, the last one queued
	dead, deadStage  int64 // deploy jobs discarded on env/prod and env/stage
	alphaToken       int64 // fencing token of the lease on locks/alpha
	cooled           int64 // the remediate job whose end started node/7's cooldown
}

func num(v any) int64 { return int64(v.(float64)) }

// seed registers three kinds, takes three leases and makes jobs in every interesting state,
// and a resource that cools down, all through the HTTP API with token ("" on a server without
// auth).
func seed(d *daemon, token string) seeded {
	d.t.Helper()
	var s seeded
	d.must(200, token, "PUT", "/v1/kinds/build", map[string]any{"max_attempts": 3, "timeout_ms": 600000})
	d.must(200, token, "PUT", "/v1/kinds/deploy", map[string]any{"max_attempts": 1, "policy": "reject",
		"from_states": []string{"", "READY"}, "running_state": "DEPLOYING", "success_state": "READY", "failure_state": "FAILED"})
	d.must(200, token, "PUT", "/v1/kinds/remediate", map[string]any{"policy": "skip", "resource_cooldown_ms": 3600000})
	for _, l := range []struct{ key, holder string }{{"locks/alpha", "ci-7"}, {"locks/beta", "ops"}, {"other/gamma", "ci-7"}} {
		out := d.must(200, token, "POST", "/v1/locks/acquire", map[string]any{"key": l.key, "holder": l.holder,
			"ttl_ms": 3600000, "metadata": map[string]any{"pipeline": "1234"}})
		if l.key == "locks/alpha" {
			s.alphaToken = num(out["lease"].(map[string]any)["token"])
		}
	}
	s.dead = deadLetter(d, token, "env/prod")
	s.deadStage = deadLetter(d, token, "env/stage")
	// node/7 cools down for an hour after its remediation succeeded.
	s.cooled = num(d.must(201, token, "POST", "/v1/jobs", map[string]any{"kind": "remediate", "resource": "node/7"})["id"])
	c := claim(d, token, "runner-3", "remediate", s.cooled)
	d.must(200, token, "POST", fmt.Sprintf("/v1/jobs/%d/complete", s.cooled), map[string]any{"token": c["token"]})
	for i := range 3 {
		j := d.must(201, token, "POST", "/v1/jobs", map[string]any{"kind": "build", "resource": "repo/api", "args": map[string]any{"ref": fmt.Sprintf("v%d", i)}})
		switch i {
		case 0:
			s.running = num(j["id"])
		case 2:
			s.waiting = num(j["id"])
		}
	}
	d.must(200, token, "POST", "/v1/jobs/claim", map[string]any{"worker": "runner-2", "kinds": []string{"build"}, "ttl_ms": 3600000})
	return s
}

// claim claims the one available job of kind as worker and checks it is job want.
func claim(d *daemon, token, worker, kind string, want int64) map[string]any {
	d.t.Helper()
	c := d.must(200, token, "POST", "/v1/jobs/claim", map[string]any{"worker": worker, "kinds": []string{kind}})
	jobs := c["jobs"].([]any)
	if len(jobs) != 1 || num(jobs[0].(map[string]any)["id"]) != want {
		d.t.Fatalf("claimed %v, want job %d", jobs, want)
	}
	return jobs[0].(map[string]any)
}

// deadLetter submits a deploy job on resource and fails its only attempt: it is discarded.
func deadLetter(d *daemon, token, resource string) int64 {
	d.t.Helper()
	id := num(d.must(201, token, "POST", "/v1/jobs", map[string]any{"kind": "deploy", "resource": resource, "args": map[string]any{"env": resource}})["id"])
	c := claim(d, token, "runner-1", "deploy", id)
	d.must(200, token, "POST", fmt.Sprintf("/v1/jobs/%d/fail", id), map[string]any{"token": c["token"], "message": "cluster unreachable"})
	return id
}
