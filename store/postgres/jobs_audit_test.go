package postgres_test

import (
	"testing"

	"github.com/batonhq/baton/store/storetest"
)

func TestJobAudit(t *testing.T) {
	storetest.RunJobAudit(t, openStore(t, newSchema(t)))
}

func TestJobAuditReplace(t *testing.T) {
	storetest.RunJobAuditReplace(t, openStore(t, newSchema(t)))
}

func TestJobSupersededCount(t *testing.T) {
	storetest.RunJobSupersededCount(t, openStore(t, newSchema(t)))
}
