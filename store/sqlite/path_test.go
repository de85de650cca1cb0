package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A database file whose directory is missing, or is a file, is refused naming the path and the
// cause, instead of the driver's "unable to open database file (14)".
func TestOpenNamesAMissingDirectory(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no", "such")
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{filepath.Join(missing, "x.db"), "cannot create " + filepath.Join(missing, "x.db") + ": directory " + missing + " does not exist"},
		{filepath.Join(notDir, "x.db"), notDir + " is not a directory"},
	} {
		st, err := Open(context.Background(), c.path, Config{})
		if err == nil {
			st.Close()
			t.Fatalf("Open(%s) succeeded", c.path)
		}
		if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "(14)") {
			t.Errorf("Open(%s): %v, want %q", c.path, err, c.want)
		}
	}
	st, err := Open(context.Background(), filepath.Join(dir, "ok.db"), Config{})
	if err != nil {
		t.Fatalf("Open in an existing directory: %v", err)
	}
	st.Close()
}
