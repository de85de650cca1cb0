package postgres_test

import (
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store/storetest"
)

// BenchmarkTreeGrant: a grant and release of a key three levels below a tree's root against the
// same cycle on a flat key, in the same run (storetest.BenchTreeGrant). On PostgreSQL a tree key's
// exclusive grant and its release are one round trip each (trees_one.go): the locks of the holds'
// transaction (its ancestors' rows FOR SHARE) and one statement; a shared one is the holds'
// transaction, as a flat shared one.
func BenchmarkTreeGrant(b *testing.B) {
	s := openDefault(b, newSchema(b))
	locker, err := baton.NewLocker(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchTreeGrant(b, locker, s)
}
