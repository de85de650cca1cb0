package peers

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// sideCost sums what one side of a River comparison cost over its timed runs: wall time, WAL
// written, and CPU time of this process and of the PostgreSQL server.
type sideCost struct {
	time         time.Duration
	wal, cpu, pg float64
}

// measure runs f once, timed, and adds its cost.
func (c *sideCost) measure(b *testing.B, pool *pgxpool.Pool, meter *cpuMeter, f func() error) {
	lsn := walLSN(b, pool)
	self0, pg0 := meter.read()
	start := time.Now()
	if err := f(); err != nil {
		b.Fatal(err)
	}
	c.time += time.Since(start)
	self1, pg1 := meter.read()
	c.wal += walSince(b, pool, lsn)
	c.cpu += self1 - self0
	c.pg += pg1 - pg0
}

// reportVsRiver reports both sides' jobs/s and x-river (River time ÷ Baton time), and per job
// the WAL written and the CPU time of this process (the client and its driver) and of the
// PostgreSQL server, with x-river-cpu (River's CPU ÷ Baton's: > 1, Baton costs less). WAL and
// CPU are steadier than jobs/s on a loaded machine (the server's CPU is attributable only on a
// server the benchmark has to itself), and show where a wall-time gap comes from.
func reportVsRiver(b *testing.B, jobs float64, baton, river sideCost) {
	b.ReportMetric(jobs/baton.time.Seconds(), "jobs/s")
	b.ReportMetric(jobs/river.time.Seconds(), "river-jobs/s")
	b.ReportMetric(river.time.Seconds()/baton.time.Seconds(), "x-river")
	b.ReportMetric(baton.wal/jobs, "wal-B/job")
	b.ReportMetric(river.wal/jobs, "river-wal-B/job")
	b.ReportMetric(baton.cpu*1e6/jobs, "go-cpu-us/job")
	b.ReportMetric(baton.pg*1e6/jobs, "pg-cpu-us/job")
	b.ReportMetric(river.cpu*1e6/jobs, "river-go-cpu-us/job")
	b.ReportMetric(river.pg*1e6/jobs, "river-pg-cpu-us/job")
	if baton.cpu+baton.pg > 0 {
		b.ReportMetric((river.cpu+river.pg)/(baton.cpu+baton.pg), "x-river-cpu")
	}
}
