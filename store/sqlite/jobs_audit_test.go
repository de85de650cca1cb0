package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/batonhq/baton/store/storetest"
)

func TestJobAudit(t *testing.T) {
	storetest.RunJobAudit(t, open(t, filepath.Join(t.TempDir(), "baton.db")))
}

func TestJobAuditReplace(t *testing.T) {
	storetest.RunJobAuditReplace(t, open(t, filepath.Join(t.TempDir(), "baton.db")))
}

func TestJobSupersededCount(t *testing.T) {
	storetest.RunJobSupersededCount(t, open(t, filepath.Join(t.TempDir(), "baton.db")))
}
