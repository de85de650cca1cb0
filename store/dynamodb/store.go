// Package dynamodb is a Baton lease store on Amazon DynamoDB (github.com/aws/aws-sdk-go-v2).
//
// It lives in its own Go module (github.com/batonhq/baton/store/dynamodb) so that the AWS SDK
// stays out of the core module. See docs/guarantees.md ("DynamoDB") for what it promises.
//
// One table, partition key "k" (string), one item per lease key, never deleted (item.go). Every
// change is one conditional UpdateItem on that item; reads are strongly consistent GetItem
// calls. DynamoDB has no clock a condition can read, so expiry is decided the way dynamolock
// decides it (observe.go): a contender takes a key over only after it has itself seen the same
// record version unchanged for the lease's TTL (plus its lock-delay) on its own monotonic clock.
package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batonhq/baton/internal/notify"
	"github.com/batonhq/baton/store"
)

// Config configures a Store.
type Config struct {
	// Table is the DynamoDB table holding the leases (required). Stores on different tables are
	// independent.
	Table string
	// Region of the table; the SDK's default chain (AWS_REGION, shared config) if empty.
	Region string
	// Endpoint overrides the service endpoint (a local DynamoDB-compatible server such as
	// dynalite: http://127.0.0.1:4567). Empty: the region's endpoint.
	Endpoint string
	// Credentials, if set, sign the requests; the SDK's default chain (environment, shared
	// files, instance role) otherwise.
	Credentials aws.CredentialsProvider
	// CreateTable creates the table (on-demand capacity) on Open if it does not exist; this
	// needs the dynamodb:CreateTable permission. Without it, a missing table is an error.
	CreateTable bool
	// MaxAttempts bounds the attempts of one request that DynamoDB throttles
	// (ProvisionedThroughputExceededException, ThrottlingException) or that fails transiently;
	// 10 if zero. Attempts are spaced by a random delay up to 25 ms * 2^attempt, capped at
	// MaxBackoff (backoff.go).
	MaxAttempts int
	// MaxBackoff caps the backoff between attempts; 1 s if zero.
	MaxBackoff time.Duration
	// DriftFactor is how much faster this process's clock may run than a holder's, as a share
	// of a TTL (DefaultDriftFactor if zero): a lease seen unchanged is expired for this store
	// only after TTL × (1 + DriftFactor) on its clock (lock-delays and cooldowns, which are
	// not about safety, are not stretched).
	DriftFactor float64
}

// DefaultDriftFactor is Config.DriftFactor when zero: the Locker's default (baton.DefaultDriftFactor).
const DefaultDriftFactor = 0.01

// Store is a store.Store on DynamoDB.
type Store struct {
	store.NoAudit // Events lists nothing: no audit log

	cli     *dynamodb.Client
	table   string
	hub     *notify.Hub
	seen    observations
	drift   float64          // Config.DriftFactor
	now     func() time.Time // the monotonic clock of observations; time.Now (a test moves it by hand)
	wall    func() time.Time // the wall clock of AcquiredAt; time.Now (tests skew it)
	closed  store.Closed
	closeMu sync.Once
}

var _ store.Store = (*Store)(nil)

// Open builds a client from cfg, checks (or creates) the table and returns a store.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Table == "" {
		return nil, errors.New("dynamodb: no table")
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 10
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = time.Second
	}
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = cfg.MaxAttempts
				o.MaxBackoff = cfg.MaxBackoff
				o.Backoff = jitter{base: 25 * time.Millisecond, max: cfg.MaxBackoff}
				// The SDK's client-side retry quota fails requests outright once many were
				// throttled; a lock client must keep backing off instead.
				o.RateLimiter = ratelimit.None
			})
		}),
	}
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	if cfg.Credentials != nil {
		opts = append(opts, awsconfig.WithCredentialsProvider(cfg.Credentials))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("dynamodb: load AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		return nil, errors.New("dynamodb: no region: set Config.Region (URL parameter region) or AWS_REGION")
	}
	cli := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	})
	if err := ensureTable(ctx, cli, cfg.Table, awsCfg.Region, cfg.CreateTable); err != nil {
		return nil, err
	}
	s := New(cli, cfg.Table)
	if cfg.DriftFactor > 0 {
		s.drift = cfg.DriftFactor
	}
	return s, nil
}

// New returns a store on an existing client and table (which it does not check).
func New(cli *dynamodb.Client, table string) *Store {
	s := &Store{cli: cli, table: table, hub: notify.NewHub(), now: time.Now, wall: time.Now, drift: DefaultDriftFactor}
	s.NoAudit = store.NewNoAudit(&s.closed)
	return s
}

// wait is how long this store must see a record unchanged for d to have passed for its writer:
// d plus the drift factor, as this store's clock may run that much faster.
func (s *Store) wait(d time.Duration) time.Duration {
	return d + time.Duration(s.drift*float64(d))
}

// Client returns the DynamoDB client.
func (s *Store) Client() *dynamodb.Client { return s.cli }

// Table returns the table's name.
func (s *Store) Table() string { return s.table }

// Capabilities: tokens are a per-key counter on an item never deleted; no push across
// processes (DynamoDB Streams would need another permission and a poller); no audit log.
func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{FencingTokens: true, PushWakeup: false, Audit: false, Owners: true}
}

// Subscribe wakes on releases and force-releases made through this Store only; waiters in
// other processes poll (baton.Config.PollInterval).
func (s *Store) Subscribe(key string) (<-chan struct{}, func()) { return s.hub.Subscribe(key) }

// Close marks the store closed and wakes its waiters. Leases stay in the table.
func (s *Store) Close() error {
	s.closeMu.Do(func() {
		s.closed.Store(true)
		s.hub.NotifyAll()
	})
	return nil
}
