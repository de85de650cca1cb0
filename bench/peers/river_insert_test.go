package peers

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	var batonTime, riverTime time.Duration
	var batonWAL, riverWAL, batonCPU, riverCPU, batonPG, riverPG float64
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
		run := func(f func(context.Context, int, int) error, into *time.Duration, wal, cpu, pg *float64) {
			lsn := walLSN(b, sides.pool)
			self0, pg0 := sides.meter.read()
			start := time.Now()
			if err := f(ctx, from, from+n); err != nil {
				b.Fatal(err)
			}
			*into += time.Since(start)
			self1, pg1 := sides.meter.read()
			*wal += walSince(b, sides.pool, lsn)
			*cpu += self1 - self0
			*pg += pg1 - pg0
		}
		if i%2 == 0 {
			run(sides.river, &riverTime, &riverWAL, &riverCPU, &riverPG)
			run(sides.baton, &batonTime, &batonWAL, &batonCPU, &batonPG)
		} else {
			run(sides.baton, &batonTime, &batonWAL, &batonCPU, &batonPG)
			run(sides.river, &riverTime, &riverWAL, &riverCPU, &riverPG)
		}
	}
	if batonTime > 0 && riverTime > 0 {
		jobs := float64(b.N)
		b.ReportMetric(jobs/batonTime.Seconds(), "jobs/s")
		b.ReportMetric(jobs/riverTime.Seconds(), "river-jobs/s")
		b.ReportMetric(riverTime.Seconds()/batonTime.Seconds(), "x-river")
		b.ReportMetric(float64(batonTime.Nanoseconds())/jobs, "ns/job")
		// As in BenchmarkRiverJobs: WAL and CPU time per job (this process; the PostgreSQL
		// server, attributable only on a server the benchmark has to itself), steadier than
		// jobs/s on a loaded machine.
		b.ReportMetric(batonWAL/jobs, "wal-B/job")
		b.ReportMetric(riverWAL/jobs, "river-wal-B/job")
		b.ReportMetric(batonCPU*1e6/jobs, "go-cpu-us/job")
		b.ReportMetric(batonPG*1e6/jobs, "pg-cpu-us/job")
		b.ReportMetric(riverCPU*1e6/jobs, "river-go-cpu-us/job")
		b.ReportMetric(riverPG*1e6/jobs, "river-pg-cpu-us/job")
		if batonCPU+batonPG > 0 {
			b.ReportMetric((riverCPU+riverPG)/(batonCPU+batonPG), "x-river-cpu")
		}
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
