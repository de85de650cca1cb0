package client_test

import "time"

// hangGuard bounds each wait of these tests for a condition (a lease granted, a job run, a
// worker stopped). It is never what a test checks: it only turns a hang into a failure that
// names what was pending. Minutes, so that a loaded machine cannot reach it while things move.
const hangGuard = 3 * time.Minute
