package peers

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store/postgres"
)

// Submitting jobs, Baton against River (github.com/riverqueue/river, riverpgxv5), on the same
// PostgreSQL in the same run: Queue.Submit against Client.Insert from insertClients goroutines,
// and Queue.SubmitMany against Client.InsertMany in batches of insertBatch. Each side has its own
// schema and a pool of insertClients connections for statements; jobs name one of
// insertResources resources (Baton queues them per resource; River does not keep the jobs of a
// resource apart). The sides alternate in blocks so that drift weighs on both alike. ns/op is
// per job for Baton; jobs/s of both and the ratio (x-river, >1 = Baton faster) are reported, and
// per job for each side: WAL bytes and the CPU time of this process and of the PostgreSQL server
// (x-river-cpu: River's total over Baton's).
//
//	go test -run '^$' -bench 'Submit.*VsRiver' -benchtime 20000x ./bench/peers/

const (
	insertClients   = 8
	insertBatch     = 1000
	insertResources = 10000
)

// insertSides are the two submitters of one benchmark: one call submits jobs [from, to). pool
// reads the server's WAL position and meter the CPU times (see pairedInsert).
type insertSides struct {
	baton, river func(ctx context.Context, from, to int) error
	pool         *pgxpool.Pool
	meter        *cpuMeter
}

func newInsertSides(b *testing.B) (*baton.Queue, *river.Client[pgx.Tx], *pgxpool.Pool) {
	ctx := context.Background()
	pool := pgPool(b, insertClients)
	schema := pgSchema(b, pool, "river_ins", true)
	driver := riverpgxv5.New(pool)
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		b.Fatal(err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, riverNoopWorker{})
	rc, err := river.NewClient(driver, &river.Config{Schema: schema, Workers: workers})
	if err != nil {
		b.Fatal(err)
	}
	s, err := postgres.Open(ctx, pgDSN(), postgres.Config{Schema: pgSchema(b, pool, "baton_ins", false), MaxConns: insertClients})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	q, err := baton.NewQueue(ctx, s, &baton.QueueConfig{Kinds: []baton.Kind{{Name: "insert_noop"}}})
	if err != nil {
		b.Fatal(err)
	}
	return q, rc, pool
}

func insertResource(i int) string { return fmt.Sprintf("r%d", i%insertResources) }

// pairedInsert runs both sides over b.N jobs in blocks, alternating which goes first, and reports.
func pairedInsert(b *testing.B, sides insertSides) {
	ctx := context.Background()
	const blocks = 4
	var baton, river sideCost
	b.ResetTimer()
	b.StopTimer()
	next := 0
	for i := range blocks {
		n := b.N / blocks
		if i == blocks-1 {
			n = b.N - (blocks-1)*(b.N/blocks)
		}
		if n == 0 {
			continue
		}
		from := next
		next += n
		run := func(f func(context.Context, int, int) error, cost *sideCost) {
			cost.measure(b, sides.pool, sides.meter, func() error { return f(ctx, from, from+n) })
		}
		if i%2 == 0 {
			run(sides.river, &river)
			run(sides.baton, &baton)
		} else {
			run(sides.baton, &baton)
			run(sides.river, &river)
		}
	}
	if baton.time > 0 && river.time > 0 {
		jobs := float64(b.N)
		reportVsRiver(b, jobs, baton, river)
		b.ReportMetric(float64(baton.time.Nanoseconds())/jobs, "ns/job")
	}
}

// parallel runs f(i) for i in [from, to) from insertClients goroutines.
func parallel(from, to int, f func(i int) error) error {
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	errs := make(chan error, insertClients)
	for range insertClients {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				if err := f(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// BenchmarkSubmitVsRiverInsert: Queue.Submit against Client.Insert, one job per call, from
// insertClients goroutines.
func BenchmarkSubmitVsRiverInsert(b *testing.B) {
	q, rc, pool := newInsertSides(b)
	pairedInsert(b, insertSides{pool: pool, meter: newCPUMeter(b, pool),
		baton: func(ctx context.Context, from, to int) error {
			return parallel(from, to, func(i int) error {
				_, err := q.Submit(ctx, baton.SubmitParams{Kind: "insert_noop", Resource: insertResource(i),
					Args: []byte(`{"resource":"` + insertResource(i) + `"}`)})
				return err
			})
		},
		river: func(ctx context.Context, from, to int) error {
			return parallel(from, to, func(i int) error {
				_, err := rc.Insert(ctx, riverNoopArgs{Resource: insertResource(i)}, nil)
				return err
			})
		},
	})
}

// BenchmarkSubmitManyVsRiverInsertMany: Queue.SubmitMany against Client.InsertMany, batches of
// insertBatch jobs from one goroutine (both return the inserted jobs).
func BenchmarkSubmitManyVsRiverInsertMany(b *testing.B) {
	q, rc, pool := newInsertSides(b)
	pairedInsert(b, insertSides{pool: pool, meter: newCPUMeter(b, pool),
		baton: func(ctx context.Context, from, to int) error {
			for lo := from; lo < to; lo += insertBatch {
				ps := make([]baton.SubmitParams, 0, insertBatch)
				for i := lo; i < min(lo+insertBatch, to); i++ {
					ps = append(ps, baton.SubmitParams{Kind: "insert_noop", Resource: insertResource(i),
						Args: []byte(`{"resource":"` + insertResource(i) + `"}`)})
				}
				if _, err := q.SubmitMany(ctx, ps); err != nil {
					return err
				}
			}
			return nil
		},
		river: func(ctx context.Context, from, to int) error {
			for lo := from; lo < to; lo += insertBatch {
				ps := make([]river.InsertManyParams, 0, insertBatch)
				for i := lo; i < min(lo+insertBatch, to); i++ {
					ps = append(ps, river.InsertManyParams{Args: riverNoopArgs{Resource: insertResource(i)}})
				}
				if _, err := rc.InsertMany(ctx, ps); err != nil {
					return err
				}
			}
			return nil
		},
	})
}
