package baton_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store/sqlite"
)

// Submit jobs on a resource and run them with a worker: jobs on one resource run one at a time,
// in submission order, each under a lease whose fencing token the handler can pass on.
func ExampleQueue() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "baton-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "baton.db"), sqlite.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	q, err := baton.NewQueue(ctx, st, &baton.QueueConfig{
		Kinds: []baton.Kind{{Name: "deploy", MaxAttempts: 3, Timeout: 10 * time.Minute}},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, version := range []string{"v1", "v2", "v3"} {
		_, err := q.Submit(ctx, baton.SubmitParams{
			Kind: "deploy", Resource: "svc/api",
			Args:           json.RawMessage(fmt.Sprintf(`{"version":%q}`, version)),
			IdempotencyKey: "deploy:svc/api:" + version, // a retried submit returns the same job
		})
		if err != nil {
			log.Fatal(err)
		}
	}

	var ended atomic.Int32
	allDone := make(chan struct{})
	w, err := q.NewWorker(baton.WorkerConfig{
		Handlers: map[string]baton.Handler{
			"deploy": func(ctx context.Context, job *baton.Job) error {
				var args struct{ Version string }
				if err := json.Unmarshal(job.Args, &args); err != nil {
					return baton.Permanent(err) // retrying will not help
				}
				// ctx is cancelled if the job's lease is lost, the job is cancelled or it
				// times out; job.Token lets the target refuse a stale deployer.
				fmt.Println("deploying", args.Version, "to", job.Resource)
				return ctx.Err()
			},
		},
		OnJobEnd: func(job *baton.Job, outcome baton.JobState, _ time.Duration) {
			if ended.Add(1) == 3 {
				close(allDone)
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		log.Fatal(err)
	}
	<-allDone
	if err := w.Stop(ctx); err != nil {
		log.Fatal(err)
	}

	page, err := q.ListJobs(ctx, baton.JobListParams{Resource: "svc/api"})
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range page.Jobs {
		fmt.Println(j.ID, j.State, "after", j.Attempt, "attempt(s)")
	}
	// Output:
	// deploying v1 to svc/api
	// deploying v2 to svc/api
	// deploying v3 to svc/api
	// 1 succeeded after 1 attempt(s)
	// 2 succeeded after 1 attempt(s)
	// 3 succeeded after 1 attempt(s)
}
