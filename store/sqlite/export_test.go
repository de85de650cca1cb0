package sqlite

// PendingRenewals is how many renewals wait in the batch that new ones join.
func PendingRenewals(s *Store) int {
	s.renews.mu.Lock()
	defer s.renews.mu.Unlock()
	if s.renews.pending == nil {
		return 0
	}
	return len(s.renews.pending.reqs)
}

// ListSQL and ResourceListSQL are the listing statements for each of the four shapes of a key
// range (see keyRange), for checking their query plans.
func ListSQL(shape int) string         { return listSQL(shape) }
func ResourceListSQL(shape int) string { return resourceListSQL(shape) }

// JobCountsSQL is JobCounts' statement.
const JobCountsSQL = jobCountsSQL

// EventsSQL is Events' statement for each of the four shapes (see store.EventsParams.Shape).
func EventsSQL(shape int) string { return eventsSQL(shape) }

// The statements of trees (trees_grant.go, trees.go), for checking their query plans.
const TreeAcquireSQL = treeAcquireSQL

var (
	TreeHolderSQL     = sqlTreeHolder
	TreeTicketsSQL    = sqlTreeTickets
	TreeJobsSQL       = sqlTreeJobs
	RelatedWaitingSQL = sqlRelatedWaiting
)
