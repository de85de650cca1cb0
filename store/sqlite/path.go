package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// checkDir says plainly why a database file cannot be created where path points, before the
// driver does so with "unable to open database file (14)": its directory does not exist, or is
// not a directory. Other failures (permissions, a full disk) are left to the driver.
func checkDir(path string) error {
	p, _, _ := strings.Cut(path, "?")
	if p == "" || p == ":memory:" || strings.HasPrefix(p, "file:") {
		return nil
	}
	dir := filepath.Dir(p)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("sqlite: cannot create %s: directory %s does not exist (create it first)", p, dir)
	case err == nil && !fi.IsDir():
		return fmt.Errorf("sqlite: cannot create %s: %s is not a directory", p, dir)
	}
	return nil
}
