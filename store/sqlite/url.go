package sqlite

import (
	"context"
	"errors"
	"log/slog"

	"github.com/batonhq/baton/store"
)

// OpenURL opens a store, with the audit log on (a server lists it), from the part of a store URL
// after "sqlite://":
//
//	./baton.db            a file relative to the working directory
//	/var/lib/baton.db     an absolute path (sqlite:///var/lib/baton.db)
//	:memory:              in memory (tests)
//
// It is the opener internal/storeurl registers for the sqlite scheme. name is safe to log.
func OpenURL(ctx context.Context, rest string, _ *slog.Logger) (st store.Store, name string, err error) {
	if rest == "" {
		return nil, "", errors.New(`store URL "sqlite://": the SQLite path is empty`)
	}
	s, err := Open(ctx, rest, Config{Audit: true})
	if err != nil {
		return nil, "", err
	}
	return s, "sqlite:" + rest, nil
}
