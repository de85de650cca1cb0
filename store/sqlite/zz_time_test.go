package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/batonhq/baton/store"
)

func TestZZTime(t *testing.T) {
	if os.Getenv("ZZ") == "" {
		t.Skip()
	}
	s := open(t, filepath.Join(t.TempDir(), "x.db"))
	ctx := context.Background()
	if err := s.RegisterKinds(ctx, []store.Kind{{Name: "k"}}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{100, 1000, 3000} {
		var ps []*store.SubmitParams
		for i := 0; i < n; i++ {
			ps = append(ps, &store.SubmitParams{Kind: "k", Resource: fmt.Sprintf("r/%d", i%100)})
		}
		t0 := time.Now()
		if _, err := s.SubmitJobs(ctx, ps); err != nil {
			t.Fatal(err)
		}
		fmt.Println(n, time.Since(t0))
	}
}
