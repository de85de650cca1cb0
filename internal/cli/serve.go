package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/storeurl"
	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
)

// serveFlags are the serve command's settings.
type serveFlags struct {
	listen, store, authFile, tlsCert, tlsKey, logFormat string
	insecureNoAuth                                      bool
	maxWait, shutdownGrace                              time.Duration
	reapInterval, jobRetention, maxQueueWait            time.Duration
	deadLetterRetention, bodyTimeout                    time.Duration
	maxInflight, maxQueue, maxConns                     int
	// periodicFile names the periodic jobs file; periodic is what it holds.
	periodicFile string
	periodic     []baton.PeriodicJob
	allowedHosts listFlag
}

func (a *app) serveCommand() *cobra.Command {
	var f serveFlags
	cmd := a.command(&cobra.Command{
		Use:   "serve [flags]",
		Short: "run the HTTP API server",
		Long: `Runs the Baton HTTP API over a lease store. Every flag can also be set with an environment
variable: BATON_ and the flag's name in upper case with _ for - (BATON_STORE, BATON_AUTH_FILE,
BATON_SHUTDOWN_GRACE, ...); a flag on the command line wins.

Traces: with OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or
OTEL_TRACES_EXPORTER=otlp) set, spans go to that OTLP/HTTP endpoint; the other standard OTEL_*
variables apply. OTEL_SDK_DISABLED=true turns them off (docs/observability.md).

Store URLs:
  sqlite://./baton.db                     a SQLite file (default); leases, jobs, audit log
  postgres://user:pass@host/db            PostgreSQL (?baton_schema=S, default "baton"); leases, jobs, audit log
  redis://host:6379/0, rediss://…         one Redis server (?baton_prefix=P); leases only, no audit log
  redis+redlock://h1:p1,h2:p2,h3:p3       Redlock over independent Redis servers; leases only

Only in the baton-full binary (cmd/baton-full), not in baton:
  etcd://h1:2379,h2:2379                  etcd (?baton_prefix=P); leases only, no audit log
  kubernetes://NAMESPACE                  Lease objects (?kubeconfig=PATH); leases only
  dynamodb://TABLE                        a DynamoDB table (?region=R); leases only

Examples:
  baton serve                                        # SQLite file ./baton.db, 127.0.0.1:7725
  baton serve --store postgres://baton@db/app         # PostgreSQL, schema "baton"
  baton serve --listen :7725 --auth-file tokens.txt --tls-cert c.pem --tls-key k.pem`,
		Args: noArgs,
	}, meta{exits: []int{exitOK, exitError, exitUsage}})
	fs := cmd.Flags()
	fs.StringVar(&f.listen, "listen", "127.0.0.1:7725", "address to listen on")
	fs.StringVar(&f.store, "store", "sqlite://./baton.db", "store URL: sqlite://PATH, postgres://…, redis://HOST:PORT/DB or rediss://… (refused without appendonly yes and appendfsync always unless ?baton_allow_volatile=true), redis+redlock://h1:p1,h2:p2,h3:p3; etcd://…, kubernetes://… and dynamodb://… only in the baton-full binary (cmd/baton-full)")
	fs.StringVar(&f.authFile, "auth-file", "", "bearer tokens: lines of \"name role sha256-hex\"")
	fileFlag(cmd, "auth-file")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate file")
	fileFlag(cmd, "tls-cert")
	fs.StringVar(&f.tlsKey, "tls-key", "", "TLS key file")
	fileFlag(cmd, "tls-key")
	fs.StringVar(&f.logFormat, "log-format", "text", "text or json")
	enumFlag(cmd, "log-format", "text", "json")
	fs.BoolVar(&f.insecureNoAuth, "insecure-no-auth", false, "allow a non-loopback address without --auth-file")
	fs.DurationVar(&f.maxWait, "max-wait", server.DefaultMaxWait, "longest server-side wait of one acquire request")
	fs.IntVar(&f.maxInflight, "max-inflight", 0, "store calls in flight at once; more wait, renewals and releases first (0: twice the store's connections, at least 8, at most 64)")
	fs.DurationVar(&f.maxQueueWait, "max-queue-wait", server.DefaultMaxQueueWait, "once the oldest waiting acquire, listing, submit or claim has waited this long, new ones get 503 overloaded with Retry-After until the store catches up (renewals and releases are never shed for time; -1s: no bound)")
	fs.IntVar(&f.maxQueue, "max-queue", server.DefaultMaxQueue, "store calls that may wait; past it new acquires, listings, submits and claims get 503 overloaded with Retry-After (renewals and releases: 4x; -1: no bound)")
	fs.DurationVar(&f.shutdownGrace, "shutdown-grace", 10*time.Second, "how long SIGTERM waits for requests in flight")
	fs.DurationVar(&f.reapInterval, "reap-interval", baton.DefaultReapInterval, "how often the maintenance leader returns jobs whose lease expired to the queue")
	fs.DurationVar(&f.jobRetention, "job-retention", baton.DefaultRetention, "how long finished jobs are kept before the cleaner deletes them")
	fs.StringVar(&f.periodicFile, "periodic-file", "", "periodic jobs (JSON: {\"periodic\": [{\"name\", \"schedule\", \"kind\", \"resource\", \"args\"}]}) that the maintenance leader submits, one job per period")
	fileFlag(cmd, "periodic-file")
	fs.DurationVar(&f.deadLetterRetention, "dead-letter-retention", 0, "how long dead letters (discarded jobs) are kept before the cleaner deletes them, apart from --job-retention; 0 keeps them until purged")
	fs.DurationVar(&f.bodyTimeout, "body-timeout", server.DefaultBodyTimeout, "how long a request's body may take to arrive after its headers; later, 408 and the connection is closed (answers, long-polls included, are not bounded by it; -1s: no bound)")
	fs.IntVar(&f.maxConns, "max-conns", 0, "client connections open at once; one more is answered 503 and closed (0: 1024, or half the open-file limit if lower; -1: no bound)")
	f.allowedHosts.split = true
	fs.Var(&f.allowedHosts, "allowed-host", "a host name or IP address clients reach the server by, besides loopback names and the --listen host; repeatable or comma-separated. Without --auth-file every other Host header is refused with 403 (DNS rebinding); with it, the Host is checked only if this is given")
	// Every flag has its variable, named in its help: one rule, so none is forgotten.
	fs.VisitAll(func(fl *pflag.Flag) { fl.Usage += " (env " + serveEnvName(fl.Name) + ")" })
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := serveFromEnv(cmd.Flags()); err != nil {
			return usagef("%v", err)
		}
		stop, err := startTracing("serve", a.stderr)
		if err != nil {
			return usagef("%v", err)
		}
		defer stop()
		return a.serve(cmd, f)
	}
	return cmd
}

// serveEnvName is the environment variable of a serve flag: BATON_ and the flag's name in upper
// case with "_" for "-" (--shutdown-grace: BATON_SHUTDOWN_GRACE).
func serveEnvName(flagName string) string {
	return "BATON_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// serveFromEnv sets each flag the command line did not give from its environment variable, if
// set; a value the flag refuses is an error naming the variable and the rule (never ignored).
func serveFromEnv(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		env := serveEnvName(f.Name)
		v, ok := os.LookupEnv(env)
		if !ok || f.Changed || err != nil || f.Name == "help" {
			return
		}
		if f.Value.Set(v) != nil {
			err = fmt.Errorf("%s=%q: %s", env, v, valueRule(f))
		}
	})
	return err
}

// serve checks the settings that need more than their flag's type, and runs the server until
// SIGTERM or SIGINT.
func (a *app) serve(cmd *cobra.Command, f serveFlags) error {
	if f.periodicFile != "" {
		jobs, err := readPeriodicFile(f.periodicFile)
		if err != nil {
			return &usageError{msg: fmt.Sprintf("--periodic-file %s: %v", f.periodicFile, err), plain: true}
		}
		f.periodic = jobs
	}
	if f.deadLetterRetention < 0 {
		return usagef("--dead-letter-retention (or BATON_DEAD_LETTER_RETENTION) must not be negative (got %s)", f.deadLetterRetention)
	}
	var log *slog.Logger
	switch f.logFormat {
	case "text":
		log = slog.New(slog.NewTextHandler(a.stderr, nil))
	case "json":
		log = slog.New(slog.NewJSONHandler(a.stderr, nil))
	default:
		return &usageError{msg: fmt.Sprintf("--log-format must be text or json, not %q", f.logFormat), plain: true}
	}
	quietRedis(log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, f, log); err != nil {
		// A setting the server refuses is a usage error naming its flag, not the server's field.
		var inv *store.InvalidArgumentError
		if errors.As(err, &inv) {
			if fl := cmd.Flags().Lookup(strings.ReplaceAll(inv.Field, "_", "-")); fl != nil {
				return usagef("--%s %s: %s", fl.Name, fl.Value, inv.Rule)
			}
		}
		log.Error("baton serve", "err", err)
		return &loggedError{err}
	}
	return nil
}

func serve(ctx context.Context, f serveFlags, log *slog.Logger) error {
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	var auth *server.Auth
	if f.authFile != "" {
		a, err := server.LoadAuthFile(f.authFile)
		if err != nil {
			return fmt.Errorf("--auth-file: %w", err)
		}
		auth = a
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return err
	}
	if auth == nil {
		if !isLoopback(ln.Addr()) && !f.insecureNoAuth {
			ln.Close()
			return fmt.Errorf("refusing to listen on %s without --auth-file: anyone could force-release locks (use a loopback address, --auth-file, or --insecure-no-auth)", f.listen)
		}
		log.Warn("no --auth-file: every caller is admin", "listen", ln.Addr().String())
		if !isLoopback(ln.Addr()) && len(f.allowedHosts.vals) == 0 {
			log.Warn("no --auth-file and no --allowed-host: requests are answered only if they name a loopback host or the --listen host", "listen", f.listen)
		}
	}
	st, storeName, err := storeurl.OpenLogged(ctx, f.store, log)
	if err != nil {
		ln.Close()
		return err
	}
	defer st.Close()
	srv, err := server.New(server.Config{Store: st, Auth: auth, Logger: log, MaxWait: f.maxWait,
		MaxInflight: f.maxInflight, MaxQueue: f.maxQueue, MaxQueueWait: f.maxQueueWait, Version: versionString(), StoreName: storeName,
		Periodic: f.periodic, Revision: readBuildDetails().Revision, AllowedHosts: f.allowedHosts.vals, ListenAddr: f.listen,
		BodyTimeout: f.bodyTimeout, MaxConns: f.maxConns})
	if err != nil {
		ln.Close()
		return err
	}
	defer srv.Close()
	if _, ok := st.(store.JobStore); !ok && len(f.periodic) > 0 {
		ln.Close()
		return fmt.Errorf("--periodic-file: the store %s keeps no jobs (periodic jobs need sqlite:// or postgres://)", storeName)
	}
	if js, ok := st.(store.JobStore); ok {
		stopMaintenance, err := startMaintenance(ctx, js, srv, f, log)
		if err != nil {
			ln.Close()
			return err
		}
		defer stopMaintenance()
	}
	var tlsConfig *tls.Config
	scheme := "http"
	if f.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			ln.Close()
			return fmt.Errorf("TLS: %w", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		scheme = "https"
	}
	hs, ln := srv.HTTPServer(ln, tlsConfig)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	log.Info("baton serving", "url", scheme+"://"+ln.Addr().String(), "store", storeName, "auth", auth != nil, "version", versionString())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Graceful stop: end long-polls (they answer lock_held at once), stop accepting, let
	// requests in flight finish, then close the store. Leases live in the store, so holders
	// renew again once a server is back within their TTL.
	log.Info("baton shutting down")
	srv.Close()
	sctx, cancel := context.WithTimeout(context.Background(), f.shutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("baton stopped")
	return nil
}

// startMaintenance runs the job queue's reaper and cleaner on this server whenever it wins the
// maintenance lease (one leader among all servers on the store). A reaped job is retried at
// once: its worker died, which is no reason to wait, and max attempts still bound a job that
// kills every worker that runs it.
func startMaintenance(ctx context.Context, js store.JobStore, srv *server.Server, f serveFlags, log *slog.Logger) (func(), error) {
	q, err := baton.NewQueue(ctx, js, &baton.QueueConfig{Logger: log})
	if err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := q.RunMaintenance(mctx, baton.MaintenanceConfig{
			ReapInterval: f.reapInterval,
			Retention:    f.jobRetention,
			// 0 keeps dead letters until purged (CleanDiscarded stays false).
			DeadLetterRetention: f.deadLetterRetention,
			Backoff:             func(int) time.Duration { return 0 },
			OnReaped:            srv.ObserveReaped,
			Periodic:            f.periodic,
			Logger:              log,
		})
		if err != nil && mctx.Err() == nil {
			log.Error("baton: job maintenance stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done }, nil
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
