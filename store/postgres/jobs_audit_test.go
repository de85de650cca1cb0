package postgres_test

import (
	"testing"

	"github.com/batonhq/baton/store/storetest"
)

func TestJobAudit(t *testing.T) {
	storetest.RunJobAudit(t, openStore(t, newSchema(t)))
}
