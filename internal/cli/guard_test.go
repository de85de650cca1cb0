package cli

import "time"

// hangGuard bounds each wait of these tests for a condition (a marker in the output, a command's
// exit). It is never what a test checks: it only turns a hang into a failure that names what was
// still pending. Minutes, so that a loaded machine (two cores shared with other test packages,
// -race) cannot reach it while things still move.
const hangGuard = 3 * time.Minute
