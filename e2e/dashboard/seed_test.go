package dashboard

import "fmt"

// seeded names what seed created.
type seeded struct {
	running, waiting int64 // build jobs on repo/api: the running head, the last one queued
	dead, deadStage  int64 // deploy jobs discarded on env/prod and env/stage
	alphaToken       int64 // fencing token of the lease on locks/alpha
}

func num(v any) int64 { return int64(v.(float64)) }

// seed registers two kinds, takes three leases and makes jobs in every interesting state, all
// through the HTTP API with token ("" on a server without auth).
func seed(d *daemon, token string) seeded {
	d.t.Helper()
	var s seeded
	d.must(200, token, "PUT", "/v1/kinds/build", map[string]any{"max_attempts": 3, "timeout_ms": 600000})
	d.must(200, token, "PUT", "/v1/kinds/deploy", map[string]any{"max_attempts": 1, "policy": "reject",
		"from_states": []string{"", "READY"}, "running_state": "DEPLOYING", "success_state": "READY", "failure_state": "FAILED"})
	for _, l := range []struct{ key, holder string }{{"locks/alpha", "ci-7"}, {"locks/beta", "ops"}, {"other/gamma", "ci-7"}} {
		out := d.must(200, token, "POST", "/v1/locks/acquire", map[string]any{"key": l.key, "holder": l.holder,
			"ttl_ms": 3600000, "metadata": map[string]any{"pipeline": "1234"}})
		if l.key == "locks/alpha" {
			s.alphaToken = num(out["lease"].(map[string]any)["token"])
		}
	}
	for i, env := range []string{"env/prod", "env/stage"} {
		j := d.must(201, token, "POST", "/v1/jobs", map[string]any{"kind": "deploy", "resource": env, "args": map[string]any{"env": env}})
		c := d.must(200, token, "POST", "/v1/jobs/claim", map[string]any{"worker": "runner-1", "kinds": []string{"deploy"}})
		claimed := c["jobs"].([]any)[0].(map[string]any)
		if num(claimed["id"]) != num(j["id"]) {
			d.t.Fatalf("claimed job %v, want %v", claimed["id"], j["id"])
		}
		d.must(200, token, "POST", fmt.Sprintf("/v1/jobs/%d/fail", num(j["id"])),
			map[string]any{"token": claimed["token"], "message": "cluster unreachable"})
		if i == 0 {
			s.dead = num(j["id"])
		} else {
			s.deadStage = num(j["id"])
		}
	}
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
