package server_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/server"
)

// metricValue returns the value of the sample series (a name with its labels, as exposed) in a
// /metrics body, or ok false when it is absent.
func metricValue(raw, series string) (float64, bool) {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(raw)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}

// waitMetric polls /metrics until series satisfies ok (the job gauges are read at most once a
// second); server.HangGuard turns a hang into a failure.
func waitMetric(t *testing.T, f *fixture, series string, what string, ok func(float64) bool) float64 {
	t.Helper()
	deadline := time.Now().Add(server.HangGuard)
	for {
		raw := f.do("GET", "/metrics", "", "", "").raw
		if v, found := metricValue(raw, series); found && ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not %s after %s (hung):\n%s", series, what, server.HangGuard, raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func metricNow(t *testing.T, f *fixture, series string) float64 {
	t.Helper()
	raw := f.do("GET", "/metrics", "", "", "").raw
	v, ok := metricValue(raw, series)
	if !ok {
		t.Fatalf("/metrics lacks %s:\n%s", series, raw)
	}
	return v
}

// A client that waits across several requests (its long-poll rounds, here at most 200 ms each)
// is one acquisition: one held failure when it gives up, and its whole wait in
// baton_lock_wait_duration_seconds when it gets the key.
func TestLockContentionIsCountedPerAcquisition(t *testing.T) {
	f := newFixture(t, false)
	r := f.post("/v1/locks/acquire", "", `{"key":"c","ttl_ms":60000}`)
	id := r.body["lease"].(map[string]any)["lease_id"].(string)
	cl, err := client.NewStore(client.Config{BaseURL: f.url, MaxWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	locker, err := baton.NewLocker(cl, &baton.Config{PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = locker.Acquire(context.Background(), "c", baton.WithWaitTimeout(3*time.Second))
	if !errors.Is(err, baton.ErrLockHeld) {
		t.Fatalf("acquire of a held key for 3s: %v", err)
	}
	if waited := time.Since(start); waited < 2*time.Second {
		t.Fatalf("gave up after %s; the test needs several rounds", waited)
	}
	requests := metricNow(t, f, `baton_http_request_duration_seconds_count{code="409",method="POST",route="acquire"}`)
	if requests < 2 { // a round is 200 ms on an idle machine: 2 in 3 s leave room for load
		t.Fatalf("%v refused requests; the test needs several rounds", requests)
	}
	if v := metricNow(t, f, `baton_lock_acquisition_failures_total{reason="held"}`); v != 1 {
		t.Fatalf("one acquisition refused over %v requests counted %v held failures, want 1", requests, v)
	}
	if v := metricNow(t, f, `baton_lock_acquisitions_total{result="failed"}`); v != 1 {
		t.Fatalf("failed acquisitions: %v, want 1", v)
	}

	// A waiter granted after a release: its wait spans its rounds.
	got := make(chan error, 1)
	go func() {
		l, err := locker.Acquire(context.Background(), "c", baton.WithWaitTimeout(time.Minute))
		if err == nil {
			err = l.Release(context.Background())
		}
		got <- err
	}()
	waitMetric(t, f, `baton_lock_acquisition_failures_total{reason="held"}`, "counted the waiter", func(v float64) bool { return v == 2 })
	time.Sleep(time.Second) // a wait several rounds long, to be measured
	f.post("/v1/locks/release", "", `{"key":"c","lease_id":"`+id+`"}`)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	raw := f.do("GET", "/metrics", "", "", "").raw
	count, _ := metricValue(raw, "baton_lock_wait_duration_seconds_count")
	sum, _ := metricValue(raw, "baton_lock_wait_duration_seconds_sum")
	if count != 2 || sum < 1 {
		t.Fatalf("lock wait: %v grants, %vs in all; want 2 (the first holder's, about 0, and the waiter's, at least 1s)", count, sum)
	}
	if v := metricNow(t, f, `baton_lock_acquisition_failures_total{reason="held"}`); v != 2 {
		t.Fatalf("held failures after the waiter's grant: %v, want 2", v)
	}
}

// The alert gauges move as jobs run and die: the oldest running attempt's age grows while it
// runs and drops to 0 when it ends; the dead-letter depth counts discarded jobs per kind.
func TestJobAlertGauges(t *testing.T) {
	f := newJobFixture(t, false)
	oldest := `baton_jobs_oldest_running_age_seconds{kind="build"}`
	if v := metricNow(t, f.fixture, oldest); v != 0 {
		t.Fatalf("%s with no job: %v", oldest, v)
	}
	for _, kind := range []string{"build", "deploy"} {
		if v := metricNow(t, f.fixture, fmt.Sprintf(`baton_job_dead_letter_depth{kind=%q}`, kind)); v != 0 {
			t.Fatalf("dead letters of %s at start: %v", kind, v)
		}
	}
	f.post("/v1/jobs", "", `{"kind":"build","resource":"a/1"}`)
	jobs := f.post("/v1/jobs/claim", "", `{"worker":"w","kinds":["build"],"limit":1}`).body["jobs"].([]any)
	if len(jobs) != 1 {
		t.Fatalf("claimed %v", jobs)
	}
	j := jobs[0].(map[string]any)
	waitMetric(t, f.fixture, oldest, "passed 1s while the job ran", func(v float64) bool { return v >= 1 })
	f.post(fmt.Sprintf("/v1/jobs/%d/fail", int64(j["id"].(float64))), "", fmt.Sprintf(`{"token":%d,"permanent":true}`, int64(j["token"].(float64))))
	waitMetric(t, f.fixture, oldest, "went back to 0 once the job ended", func(v float64) bool { return v == 0 })
	if v := metricNow(t, f.fixture, `baton_job_dead_letter_depth{kind="build"}`); v != 1 {
		t.Fatalf("dead letters of build after a permanent failure: %v", v)
	}
	if v := metricNow(t, f.fixture, `baton_job_dead_letter_depth{kind="deploy"}`); v != 0 {
		t.Fatalf("dead letters of deploy: %v", v)
	}
	if r := f.post("/v1/dlq/purge", "", `{}`); r.status != 200 {
		t.Fatalf("purge: %d %s", r.status, r.raw)
	}
	waitMetric(t, f.fixture, `baton_job_dead_letter_depth{kind="build"}`, "went to 0 after the purge", func(v float64) bool { return v == 0 })
}

// The rate gauge counts the resources on which a kind's rate is reached, and only those.
func TestJobRateReachedGauge(t *testing.T) {
	f := newJobFixture(t, false)
	if r := f.do("PUT", "/v1/kinds/remediate", "", "application/json", `{"rate":"1/1h"}`); r.status != 200 {
		t.Fatalf("register remediate: %d %s", r.status, r.raw)
	}
	gauge := `baton_job_rate_reached_resources{kind="remediate"}`
	if v := metricNow(t, f.fixture, gauge); v != 0 {
		t.Fatalf("%s before any grant: %v", gauge, v)
	}
	for _, res := range []string{"wl/1", "wl/2"} {
		f.post("/v1/jobs", "", `{"kind":"remediate","resource":"`+res+`"}`)
		jobs := f.post("/v1/jobs/claim", "", `{"worker":"w","kinds":["remediate"],"limit":1}`).body["jobs"].([]any)
		if len(jobs) != 1 {
			t.Fatalf("claim on %s: %v", res, jobs)
		}
	}
	waitMetric(t, f.fixture, gauge, "counted wl/1 and wl/2, each at its rate of 1/1h", func(v float64) bool { return v == 2 })
	if v := metricNow(t, f.fixture, `baton_job_rate_reached_resources{kind="build"}`); v != 0 {
		t.Fatalf("build has no rate: %v", v)
	}
}
