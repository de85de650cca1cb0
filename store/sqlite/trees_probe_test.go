package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkAcquireTreeProbe measures what the trees' probe (notInTreeSQL) costs the flat acquire
// statement: the statement with it and without it, on one store, each granting and releasing a
// key of its own, alternating every 50 cycles so that the load of the machine and the growth of
// the WAL weigh on both alike. "x-probe" is the time per cycle with the probe over the time
// without it (1.0: free). With synchronous=NORMAL no commit waits for the disk, so the statements'
// own cost shows.
func BenchmarkAcquireTreeProbe(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("sync="+sync, func(b *testing.B) { benchTreeProbe(b, sync) })
	}
}

func benchTreeProbe(b *testing.B, sync string) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "probe.db"), Config{Synchronous: sync})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	plain := strings.Replace(acquireSQL, "WHERE "+notInTreeSQL+"\n\t\tAND ", "WHERE ", 1)
	if plain == acquireSQL {
		b.Fatal("the acquire statement has no trees' probe to leave out")
	}
	without, err := s.db.PrepareContext(ctx, plain)
	if err != nil {
		b.Fatal(err)
	}
	defer without.Close()
	cycle := func(st *sql.Stmt, key string, i int) {
		now := s.now().UnixNano()
		id := fmt.Sprint(i)
		var r row
		var tookOver bool
		err := st.QueryRowContext(ctx, key, id, "h", now, int64(time.Minute), 0, 0, nil, "", false).Scan(r.fields(&tookOver)...)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.stmts.release.ExecContext(ctx, key, id, now, ""); err != nil {
			b.Fatal(err)
		}
	}
	const block = 50
	var with, wo time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i += block {
		n := min(block, b.N-i)
		start := time.Now()
		for j := range n {
			cycle(s.stmts.acquire, "with", i+j)
		}
		mid := time.Now()
		for j := range n {
			cycle(without, "without", i+j)
		}
		with, wo = with+mid.Sub(start), wo+time.Since(mid)
	}
	b.ReportMetric(float64(with.Nanoseconds())/float64(b.N), "with-ns/op")
	b.ReportMetric(float64(wo.Nanoseconds())/float64(b.N), "without-ns/op")
	b.ReportMetric(float64(with)/float64(wo), "x-probe")
}
