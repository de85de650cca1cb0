package chaos

import (
	"testing"

	"github.com/batonhq/baton/internal/batontest"
)

// postgres is a PostgreSQL instance of the harness's own (batontest.PGCluster: initdb in a
// temporary directory, a free loopback port, trust authentication). It never touches the
// machine's own PostgreSQL.
type postgres struct{ c *batontest.PGCluster }

// startPostgres starts the instance, or skips the test if PostgreSQL is not installed (fails if
// CI is set).
func startPostgres(t *testing.T) *postgres { return &postgres{batontest.StartPGCluster(t)} }

// startPostgresIn is startPostgres inside network namespace netns, listening on host there;
// env is added to its programs' environment.
func startPostgresIn(t *testing.T, netns, host string, env ...string) *postgres {
	return &postgres{batontest.StartPGClusterIn(t, netns, host, env...)}
}

// restart crashes the server (immediate shutdown: no checkpoint, recovery from the WAL at the
// next start) and starts it again on the same port and data.
func (p *postgres) restart() error {
	if err := p.c.Stop("immediate"); err != nil {
		return err
	}
	return p.c.Start()
}

func (p *postgres) url() string { return p.c.URL() }
