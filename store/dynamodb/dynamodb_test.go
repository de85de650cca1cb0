package dynamodb

import (
	"testing"
	"time"

	"github.com/batonhq/baton/store"
	"github.com/batonhq/baton/store/dynamodb/dynalitetest"
	"github.com/batonhq/baton/store/storetest"
)

// conformanceHarness gives each test a dynalite of its own. dynalite is one node process that
// serves requests first come, first served: on a shared server, a test's renewals would queue
// behind another test's hundreds of table scans (ListPrefixEdges) and miss a 1 s TTL on a loaded
// machine; separate processes are scheduled fairly by the kernel, as DynamoDB spreads tables
// over partitions.
func conformanceHarness() storetest.Harness {
	return storetest.Harness{KeepaliveTTL: keepaliveTTL, NewBackend: func(t testing.TB) storetest.Backend {
		endpoint := dynalitetest.Start(t).Endpoint()
		table := freshTable()
		var first *Store
		return storetest.Backend{
			Open: func(t testing.TB) store.Store {
				s := openTest(t, endpoint, table)
				if first == nil {
					first = s
				}
				return s
			},
			DeleteRow: func(t testing.TB, key string) { deleteItem(t, first, key) },
		}
	}}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, conformanceHarness())
}

// keepaliveTTL is the TTL of the conformance suite's keepalive cases here: every renew is a
// conditional write to dynalite, a node process on this loaded 2-core machine, and a one-second
// TTL leaves a renew 667 ms.
const keepaliveTTL = 3 * time.Second
