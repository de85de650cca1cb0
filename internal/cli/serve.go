package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/storeurl"
	"github.com/batonhq/baton/server"
	"github.com/batonhq/baton/store"
)

const serveUsage = `Usage: baton serve [flags]

Runs the Baton HTTP API over a lease store. Every flag can also be set with an environment
variable BATON_<NAME> (e.g. BATON_STORE, BATON_AUTH_FILE); a flag on the command line wins.

Examples:
  baton serve                                        # SQLite file ./baton.db, 127.0.0.1:7725
  baton serve --store postgres://baton@db/app         # PostgreSQL, schema "baton"
  baton serve --listen :7725 --auth-file tokens.txt --tls-cert c.pem --tls-key k.pem

Flags:
`

// serveFlags are the serve command's settings.
type serveFlags struct {
	listen, store, authFile, tlsCert, tlsKey, logFormat string
	insecureNoAuth                                      bool
	maxWait, shutdownGrace                              time.Duration
	reapInterval, jobRetention, maxQueueWait            time.Duration
	deadLetterRetention                                 time.Duration
	maxInflight, maxQueue                               int
	// periodicFile names the periodic jobs file; periodic is what it holds.
	periodicFile string
	periodic     []baton.PeriodicJob
}

func serveCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f serveFlags
	fs.StringVar(&f.listen, "listen", envOr("BATON_LISTEN", "127.0.0.1:7725"), "address to listen on (env BATON_LISTEN)")
	fs.StringVar(&f.store, "store", envOr("BATON_STORE", "sqlite://./baton.db"), "store URL: sqlite://PATH, postgres://…, redis://… (refused without appendonly yes and appendfsync always unless ?baton_allow_volatile=true) or redis+redlock://h1:p1,h2:p2,h3:p3 (env BATON_STORE)")
	fs.StringVar(&f.authFile, "auth-file", envOr("BATON_AUTH_FILE", ""), "bearer tokens: lines of \"name role sha256-hex\" (env BATON_AUTH_FILE)")
	fs.StringVar(&f.tlsCert, "tls-cert", envOr("BATON_TLS_CERT", ""), "TLS certificate file (env BATON_TLS_CERT)")
	fs.StringVar(&f.tlsKey, "tls-key", envOr("BATON_TLS_KEY", ""), "TLS key file (env BATON_TLS_KEY)")
	fs.StringVar(&f.logFormat, "log-format", envOr("BATON_LOG_FORMAT", "text"), "text or json (env BATON_LOG_FORMAT)")
	fs.BoolVar(&f.insecureNoAuth, "insecure-no-auth", os.Getenv("BATON_INSECURE_NO_AUTH") == "true", "allow a non-loopback address without --auth-file (env BATON_INSECURE_NO_AUTH=true)")
	fs.DurationVar(&f.maxWait, "max-wait", server.DefaultMaxWait, "longest server-side wait of one acquire request")
	fs.IntVar(&f.maxInflight, "max-inflight", 0, "store calls in flight at once; more wait, renewals and releases first (0: twice the store's connections, at least 8, at most 64)")
	fs.DurationVar(&f.maxQueueWait, "max-queue-wait", server.DefaultMaxQueueWait, "once the oldest waiting acquire, listing, submit or claim has waited this long, new ones get 503 overloaded with Retry-After until the store catches up (renewals and releases are never shed for time; -1s: no bound)")
	fs.IntVar(&f.maxQueue, "max-queue", server.DefaultMaxQueue, "store calls that may wait; past it new acquires, listings, submits and claims get 503 overloaded with Retry-After (renewals and releases: 4x; -1: no bound)")
	fs.DurationVar(&f.shutdownGrace, "shutdown-grace", 10*time.Second, "how long SIGTERM waits for requests in flight")
	fs.DurationVar(&f.reapInterval, "reap-interval", baton.DefaultReapInterval, "how often the maintenance leader returns jobs whose lease expired to the queue (env BATON_REAP_INTERVAL)")
	fs.DurationVar(&f.jobRetention, "job-retention", baton.DefaultRetention, "how long finished jobs are kept before the cleaner deletes them (env BATON_JOB_RETENTION)")
	fs.StringVar(&f.periodicFile, "periodic-file", envOr("BATON_PERIODIC_FILE", ""), "periodic jobs (JSON: {\"periodic\": [{\"name\", \"schedule\", \"kind\", \"resource\", \"args\"}]}) that the maintenance leader submits, one job per period (env BATON_PERIODIC_FILE)")
	fs.DurationVar(&f.deadLetterRetention, "dead-letter-retention", 0, "how long dead letters (discarded jobs) are kept before the cleaner deletes them, apart from --job-retention; 0 keeps them until purged (env BATON_DEAD_LETTER_RETENTION)")
	fs.Usage = func() {
		fmt.Fprint(stderr, serveUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "baton serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if err := durationsFromEnv(fs, map[string]string{"reap-interval": "BATON_REAP_INTERVAL", "job-retention": "BATON_JOB_RETENTION",
		"dead-letter-retention": "BATON_DEAD_LETTER_RETENTION"}); err != nil {
		fmt.Fprintf(stderr, "baton serve: %v\n", err)
		return 2
	}
	if f.periodicFile != "" {
		jobs, err := readPeriodicFile(f.periodicFile)
		if err != nil {
			fmt.Fprintf(stderr, "baton serve: --periodic-file %s: %v\n", f.periodicFile, err)
			return 2
		}
		f.periodic = jobs
	}
	if f.deadLetterRetention < 0 {
		fmt.Fprintf(stderr, "baton serve: --dead-letter-retention (or BATON_DEAD_LETTER_RETENTION) must not be negative (got %s)\n", f.deadLetterRetention)
		return 2
	}
	var log *slog.Logger
	switch f.logFormat {
	case "text":
		log = slog.New(slog.NewTextHandler(stderr, nil))
	case "json":
		log = slog.New(slog.NewJSONHandler(stderr, nil))
	default:
		fmt.Fprintf(stderr, "baton serve: --log-format must be text or json, not %q\n", f.logFormat)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, f, log); err != nil {
		log.Error("baton serve", "err", err)
		return 1
	}
	return 0
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
			return fmt.Errorf("refusing to listen on %s without --auth-file: anyone could force-release locks (use a loopback address, --auth-file, or --insecure-no-auth)", ln.Addr())
		}
		log.Warn("no --auth-file: every caller is admin", "listen", ln.Addr().String())
	}
	st, storeName, err := storeurl.OpenLogged(ctx, f.store, log)
	if err != nil {
		ln.Close()
		return err
	}
	defer st.Close()
	srv, err := server.New(server.Config{Store: st, Auth: auth, Logger: log, MaxWait: f.maxWait,
		MaxInflight: f.maxInflight, MaxQueue: f.maxQueue, MaxQueueWait: f.maxQueueWait, Version: versionString(), StoreName: storeName,
		Periodic: f.periodic, Revision: readBuildDetails().Revision})
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
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	scheme := "http"
	if f.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			ln.Close()
			return fmt.Errorf("TLS: %w", err)
		}
		hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, hs.TLSConfig)
		scheme = "https"
	}
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

// durationsFromEnv sets each flag not given on the command line from its environment variable,
// if set; a value that is not a duration is an error naming the variable (never ignored).
func durationsFromEnv(fs *flag.FlagSet, envOf map[string]string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name, env := range envOf {
		v, ok := os.LookupEnv(env)
		if !ok || given[name] {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("%s=%q: must be a duration such as 5s or 24h", env, v)
		}
	}
	return nil
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}
