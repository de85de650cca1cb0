// Package fence makes a resource refuse the writes of a stale lock holder.
//
// A lease cannot stop a holder that was paused (GC, SIGSTOP, VM migration) after its last
// check: when it wakes, it writes, possibly after the next holder has started. The fencing
// token of the lease (baton.Lease.Token, BATON_FENCING_TOKEN under `baton run`) grows with
// every grant, so the resource can tell the late writer apart: it remembers the highest token
// it has seen per resource and refuses a lower one. This package does that remembering.
//
//   - SQL resources: Check, inside the caller's own transaction on the resource's database
//     (PostgreSQL via pgx or database/sql, SQLite via database/sql), against a small table
//     created by Migrate (or the DDL constant).
//   - HTTP resources: Middleware, with a MemoryStore (one process) or a SQLStore (several).
//     Clients send the token with Header or HeaderFromEnv.
//
// Shared holders (`baton run --shared`, shared jobs) have interleaving tokens: a call in
// Shared mode (CheckMode, ModeStore.EnterMode, the Baton-Fencing-Mode header that
// HeaderFromEnv sets from BATON_FENCING_MODE) is refused only for a greater exclusive token,
// and runs beside other shared calls, never beside an exclusive one. An exclusive call, the
// default, is refused for a greater token of either mode.
//
// Equal tokens pass: the same holder writing twice is not stale. A token is stale only when
// a strictly greater one has been seen for the same resource.
//
// See docs/fencing.md for the failure this prevents, shown step by step, and for the
// conditional single-row UPDATE and object-store patterns.
package fence
