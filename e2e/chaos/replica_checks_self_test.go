package chaos

import (
	"fmt"
	"testing"
	"time"
)

// handoffLog is an audit log of n handoffs on lockKey: run i is granted, released, and run i+1,
// which started before that release, is granted gap(i) after it. Run i ran on replica i mod 3,
// so every handoff crosses replicas.
func handoffLog(n int, t0 time.Time, gap func(i int) time.Duration) ([]auditEvent, []runRecord, map[string]int) {
	var audit []auditEvent
	var runs []runRecord
	replica := map[string]int{}
	at := t0
	for i := 0; i <= n; i++ {
		id := fmt.Sprintf("c%d-0", i)
		replica[id] = i % replicaCount
		runs = append(runs, runRecord{client: fmt.Sprintf("c%d", i), id: id, startWall: t0.Add(-time.Second)})
		audit = append(audit, auditEvent{ID: int64(len(audit) + 1), At: at, Kind: "acquire", Holder: holderPrefix + id, Token: uint64(i + 1)})
		at = at.Add(100 * time.Millisecond)
		if i < n {
			audit = append(audit, auditEvent{ID: int64(len(audit) + 1), At: at, Kind: "release", Holder: holderPrefix + id, Token: uint64(i + 1)})
			at = at.Add(gap(i))
		}
	}
	return audit, runs, replica
}

func TestCheckCrossReplicaWakeups(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	end := t0.Add(time.Hour)
	for _, tc := range []struct {
		name string
		n    int
		gap  func(i int) time.Duration
		want string // the violation, or ""
	}{
		{"woken", 10, func(int) time.Duration { return 5 * time.Millisecond }, ""},
		{"woken_mostly", 10, func(i int) time.Duration { // 3 of 10 slow
			if i%3 == 2 {
				return 500 * time.Millisecond
			}
			return 5 * time.Millisecond
		}, ""},
		{"polled", 10, func(i int) time.Duration { return time.Duration(100+60*i) * time.Millisecond }, "cross_replica_wakeup_missing"},
		{"half_polled", 10, func(i int) time.Duration { return time.Duration(5+i%2*500) * time.Millisecond }, "cross_replica_wakeup_missing"},
		{"too_few", minCrossHandoffs - 1, func(int) time.Duration { return 5 * time.Millisecond }, "cross_replica_handoffs_too_few"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			audit, runs, replica := handoffLog(tc.n, t0, tc.gap)
			r := &report{}
			summary := checkCrossReplicaWakeups(audit, runs, replica, end, r, &counter{})
			got := r.violations.String()
			if tc.want == "" && got != "none" || tc.want != "" && r.violations.get(tc.want) != 1 {
				t.Errorf("violations %s, want %q; summary: %s", got, tc.want, summary)
			}
		})
	}
	t.Run("not_judged", func(t *testing.T) {
		// Slow handoffs that are no cross-replica handoffs of the fault-free phase: after its
		// end, within one replica, or to a run that started after the release.
		slow := func(int) time.Duration { return time.Second }
		audit, runs, replica := handoffLog(10, t0, slow)
		r := &report{}
		checkCrossReplicaWakeups(audit, runs, replica, t0, r, &counter{})
		if r.violations.get("cross_replica_handoffs_too_few") != 1 || r.violations.get("cross_replica_wakeup_missing") != 0 {
			t.Errorf("after the fault-free phase: violations %s", r.violations.String())
		}
		for id := range replica {
			replica[id] = 0
		}
		r = &report{}
		checkCrossReplicaWakeups(audit, runs, replica, end, r, &counter{})
		if r.violations.get("cross_replica_wakeup_missing") != 0 {
			t.Errorf("within one replica: violations %s", r.violations.String())
		}
		audit, runs, replica = handoffLog(10, t0, slow)
		for i := range runs {
			runs[i].startWall = end
		}
		r = &report{}
		checkCrossReplicaWakeups(audit, runs, replica, end, r, &counter{})
		if r.violations.get("cross_replica_wakeup_missing") != 0 {
			t.Errorf("no waiter at the release: violations %s", r.violations.String())
		}
	})
}

func TestCheckLeaderMoves(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pids := map[int]int{100: 0, 101: 1, 102: 2, 200: 0}
	grant := func(id int64, at time.Duration, pid int, token uint64) auditEvent {
		return auditEvent{ID: id, At: t0.Add(at), Kind: "acquire", Holder: fmt.Sprintf("vm:%d:abc", pid), Token: token}
	}
	kill := leaderMove{from: 0, to: 1, killedAt: t0.Add(time.Second), reaped: true}
	for _, tc := range []struct {
		name   string
		events []auditEvent
		want   string
	}{
		{"moved", []auditEvent{grant(1, 0, 100, 1), grant(2, 16*time.Second, 101, 5), grant(3, 40*time.Second, 200, 9)}, ""},
		{"same_replica_again", []auditEvent{grant(1, 0, 100, 1), grant(2, 16*time.Second, 200, 5)}, "leader_move_missing_in_audit"},
		{"no_grant_after_kill", []auditEvent{grant(1, 0, 100, 1)}, "leader_move_missing_in_audit"},
		{"unknown_process", []auditEvent{grant(1, 0, 100, 1), grant(2, 16*time.Second, 999, 5)}, "leader_move_missing_in_audit"},
		{"token_order", []auditEvent{grant(1, 0, 100, 5), grant(2, 16*time.Second, 101, 5)}, "leader_token_order"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &report{}
			summary := checkLeaderMoves(tc.events, []leaderMove{kill}, pids, r)
			got := r.violations.String()
			if tc.want == "" && got != "none" || tc.want != "" && r.violations.get(tc.want) != 1 {
				t.Errorf("violations %s, want %q; summary: %s", got, tc.want, summary)
			}
		})
	}
}
