package dashboard

import (
	"io/fs"
	"testing"
)

// TestAssetBudget keeps the first page small: every asset is loaded by the first page, and a
// first page may transfer at most 150 KB including the first API answers (about 15 KB for a
// page of 50 leases; docs/benchmarks.md measures it), so the assets get 100 KB.
func TestAssetBudget(t *testing.T) {
	total := 0
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		total += len(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("assets: %d bytes", total)
	if total > 100*1024 {
		t.Fatalf("the dashboard's assets are %d bytes; the budget is 100 KiB", total)
	}
}
