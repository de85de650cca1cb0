package combine

import "runtime"

// waitABit yields to the goroutines a test waits for; the loops around it poll a condition.
func waitABit() { runtime.Gosched() }
