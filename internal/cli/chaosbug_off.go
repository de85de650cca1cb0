//go:build !chaosbug

package cli

import (
	"io"
	"os/exec"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// chaosBugAfterStart is a hook of the fault harness's broken builds (build tag chaosbug,
// chaosbug_on.go): in every other build it does nothing.
func chaosBugAfterStart(store.Store, *baton.Lease, time.Time, time.Duration, *exec.Cmd, io.Writer) (stop func()) {
	return func() {}
}
