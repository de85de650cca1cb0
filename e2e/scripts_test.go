package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// scripts/lint.sh lints every module of the repository, and both `make lint` and
// scripts/test.sh run it: a module added later without its tidiness check fails here.
func TestLintCoversEveryModule(t *testing.T) {
	t.Parallel()
	script, err := os.ReadFile("../scripts/lint.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^modules=\(([^)]*)\)`).FindSubmatch(script)
	if m == nil {
		t.Fatal("scripts/lint.sh has no modules=(...) line")
	}
	listed := map[string]bool{}
	for _, d := range strings.Fields(string(m[1])) {
		listed[d] = true
	}
	var found []string
	_ = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git" || strings.HasSuffix(path, filepath.Join("store", "kubernetes", "testenv"))) {
			return filepath.SkipDir
		}
		if d.Name() == "go.mod" {
			rel, _ := filepath.Rel("..", filepath.Dir(path))
			found = append(found, filepath.ToSlash(rel))
		}
		return nil
	})
	if len(found) < 7 {
		t.Fatalf("found %d modules: %v", len(found), found)
	}
	for _, d := range found {
		if !listed[d] {
			t.Errorf("module %s is not in scripts/lint.sh", d)
		}
	}
	for _, f := range []string{"../Makefile", "../scripts/test.sh"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "scripts/lint.sh") {
			t.Errorf("%s does not run scripts/lint.sh", f)
		}
	}
}

// scripts/pg-test-db.sh creates the test database when the server answers but the database is
// missing (make test then runs the PostgreSQL tests instead of failing them), and leaves an
// existing one alone.
func TestPGTestDBCreatesAMissingDatabase(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("psql"); err != nil {
		t.Skip("psql is not installed")
	}
	base := os.Getenv("BATON_TEST_POSTGRES_DSN")
	if base == "" {
		base = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skipf("PostgreSQL unreachable: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) }) // after the drop below
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	db := "baton_pgtestdb_" + hex.EncodeToString(b)
	dsn := regexp.MustCompile(`^([a-z]+://[^/]*/)[^?]*`).ReplaceAllString(base, "${1}"+db)
	t.Cleanup(func() {
		if _, err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()); err != nil {
			t.Errorf("dropping %s: %v", db, err)
		}
	})
	for i := 0; i < 2; i++ { // the second run finds it
		out, err := exec.CommandContext(ctx, "../scripts/pg-test-db.sh", dsn).CombinedOutput()
		if err != nil {
			t.Fatalf("run %d: pg-test-db.sh %s: %v\n%s", i+1, dsn, err, out)
		}
		if created := strings.Contains(string(out), "creating the database"); created != (i == 0) {
			t.Errorf("run %d: output %q", i+1, out)
		}
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", db).Scan(&n); err != nil || n != 1 {
		t.Fatalf("database %s: count %d, %v", db, n, err)
	}
}

// README.md's test section names what scripts/test.sh installs with apt-get and the test
// database's variable, so that a new user knows what `make test` needs and does.
func TestReadmeSaysWhatTheTestScriptNeeds(t *testing.T) {
	t.Parallel()
	script, err := os.ReadFile("../scripts/test.sh")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	installs := regexp.MustCompile(`apt-get install -y -q ([\w.-]+)`).FindAllSubmatch(script, -1)
	if len(installs) == 0 {
		t.Fatal("scripts/test.sh installs nothing with apt-get any more: update this test")
	}
	for _, want := range append([][][]byte{{nil, []byte("BATON_TEST_POSTGRES_DSN")}, {nil, []byte("apt-get install")}, {nil, []byte("pg-test-db.sh")}}, installs...) {
		if !strings.Contains(string(readme), string(want[1])) {
			t.Errorf("README.md does not mention %s, which scripts/test.sh needs or installs", want[1])
		}
	}
}
