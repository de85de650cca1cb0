package postgres_test

import (
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store/storetest"
)

// BenchmarkTreeGrant: a grant and release of a key three levels below a tree's root against the
// same cycle on a flat key, in the same run (storetest.BenchTreeGrant). On PostgreSQL a tree key's
// grant runs the holds' transaction (its ancestors' rows locked FOR SHARE), so the exclusive cycle
// pays what a flat shared one does.
func BenchmarkTreeGrant(b *testing.B) {
	s := openDefault(b, newSchema(b))
	locker, err := baton.NewLocker(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchTreeGrant(b, locker, s)
}
