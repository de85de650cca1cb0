package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/batonhq/baton/fence"
)

// A holder writes to a SQLite resource only if its fencing token is not stale.
func ExampleCheck() {
	dir, _ := os.MkdirTemp("", "fence-example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "orders.db"))
	defer db.Close()
	ctx := context.Background()
	_ = fence.Migrate(ctx, db)
	_, _ = db.ExecContext(ctx, `CREATE TABLE orders (id integer PRIMARY KEY, status text)`)

	write := func(token uint64, status string) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := fence.Check(ctx, tx, "orders", token); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO orders VALUES (1, ?)`, status); err != nil {
			return err
		}
		return tx.Commit()
	}
	fmt.Println(write(42, "shipped")) // the current holder
	err := write(41, "cancelled")     // a paused holder wakes up
	fmt.Println(errors.Is(err, fence.ErrStaleToken), err)
	var status string
	_ = db.QueryRowContext(ctx, `SELECT status FROM orders WHERE id = 1`).Scan(&status)
	fmt.Println(status)
	// Output:
	// <nil>
	// true fence: stale fencing token 41 for resource "orders": token 42 has been seen
	// shipped
}

// An HTTP service refuses the requests of stale holders.
func ExampleMiddleware() {
	apply := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	srv := httptest.NewServer(fence.Middleware(fence.NewMemoryStore(), apply))
	defer srv.Close()
	for _, token := range []uint64{42, 42, 41} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
		fence.Header(req, "orders", token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(token, resp.StatusCode)
	}
	// Output:
	// 42 204
	// 42 204
	// 41 409
}
