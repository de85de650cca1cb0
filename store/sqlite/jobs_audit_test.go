package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/batonhq/baton/store"
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

// The rate cases on an audited file: the grants checked as the audit log recorded them.
func TestJobRateAudit(t *testing.T) {
	storetest.RunJobRateAudit(t, func(t *testing.T) store.JobStore { return open(t, filepath.Join(t.TempDir(), "baton.db")) })
}
