package fence_test

import (
	"testing"
	"time"

	"github.com/batonhq/baton/fence"
)

// BenchmarkCheck measures what fence.Check adds to a write transaction that updates one row:
// the same transaction with and without the check, alternated in one run (so load on a shared
// machine weighs on both alike), on each backend. Reports µs per plain and fenced transaction,
// and their ratio.
func BenchmarkCheck(b *testing.B) {
	for name, open := range backends(nil) {
		b.Run(name, func(b *testing.B) {
			bk := open(b)
			ctx := b.Context()
			if err := fence.Migrate(ctx, bk.handle); err != nil {
				b.Fatal(err)
			}
			if err := bk.exec(ctx, `CREATE TABLE orders (id integer PRIMARY KEY, n bigint NOT NULL)`); err != nil {
				b.Fatal(err)
			}
			if err := bk.exec(ctx, `INSERT INTO orders VALUES (1, 0)`); err != nil {
				b.Fatal(err)
			}
			write := func(fenced bool, token uint64) {
				tx, exec, commit, rollback, err := bk.begin(ctx)
				if err != nil {
					b.Fatal(err)
				}
				defer rollback()
				if fenced {
					if err := fence.Check(ctx, tx, "orders", token); err != nil {
						b.Fatal(err)
					}
				}
				if err := exec(`UPDATE orders SET n = n + 1 WHERE id = 1`); err != nil {
					b.Fatal(err)
				}
				if err := commit(); err != nil {
					b.Fatal(err)
				}
			}
			var plain, fenced time.Duration
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				write(false, 0)
				mid := time.Now()
				write(true, uint64(i+1))
				plain += mid.Sub(start)
				fenced += time.Since(mid)
			}
			b.ReportMetric(float64(plain.Microseconds())/float64(b.N), "µs/plain-tx")
			b.ReportMetric(float64(fenced.Microseconds())/float64(b.N), "µs/fenced-tx")
			b.ReportMetric(fenced.Seconds()/plain.Seconds(), "x-plain")
		})
	}
}
