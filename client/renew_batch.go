package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/batonhq/baton/internal/combine"
	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// Renewals of many leases held through one Store share requests. A process holding thousands of
// leases (a controller with one per resource) would otherwise send thousands of renew requests
// a second, each its own store transaction. Renewals that find renewSlots requests in flight
// queue, and the next free slot sends all of them in one POST /v1/locks/renew-batch, which the
// server renews in one store call. An uncontended renewal is one POST /v1/locks/renew, as
// before. Servers without the batch endpoint get single renewals.

const (
	// renewSlots is how many renew requests one Store keeps in flight before renewals combine.
	renewSlots = 4
	// clientRenewBatch bounds a batch request (its body stays well under the server's limit).
	clientRenewBatch = store.MaxRenewMany
)

func newRenewCombiner(s *Store) *combine.Combiner[*store.RenewParams, *store.Lease] {
	return &combine.Combiner[*store.RenewParams, *store.Lease]{
		Slots:    renewSlots,
		MaxBatch: clientRenewBatch,
		Run: func(ctx context.Context, calls []*combine.Call[*store.RenewParams, *store.Lease]) {
			if len(calls) > 1 && !s.noRenewBatch.Load() {
				err := s.renewBatch(ctx, calls)
				if !errors.Is(err, errNoBatchEndpoint) {
					return
				}
				s.noRenewBatch.Store(true)
			}
			s.renewEach(ctx, calls)
		},
	}
}

// errNoBatchEndpoint: the server predates POST /v1/locks/renew-batch.
var errNoBatchEndpoint = errors.New("the server has no batch renew endpoint")

// renewBatch sends calls as one batch request and sets each call's answer. It returns
// errNoBatchEndpoint, setting nothing, if the server does not know the endpoint.
func (s *Store) renewBatch(ctx context.Context, calls []*combine.Call[*store.RenewParams, *store.Lease]) error {
	req := wire.RenewBatchRequest{Leases: make([]wire.RenewRequest, len(calls))}
	for i, c := range calls {
		ttl := ceilMs(c.Req.TTL)
		req.Leases[i] = wire.RenewRequest{Key: c.Req.Key, LeaseID: c.Req.LeaseID, TTLMs: &ttl}
	}
	var resp wire.RenewBatchResponse
	err := s.do(ctx, http.MethodPost, "/v1/locks/renew-batch", nil, req, &resp)
	var pe *ProblemError
	if errors.As(err, &pe) && (pe.Status == http.StatusNotFound || pe.Status == http.StatusMethodNotAllowed) {
		return errNoBatchEndpoint
	}
	if err == nil && len(resp.Results) != len(calls) {
		err = fmt.Errorf("baton client: POST /v1/locks/renew-batch: %d results for %d renewals", len(resp.Results), len(calls))
	}
	for i, c := range calls {
		switch {
		case err != nil:
			c.Err = err
		case resp.Results[i].Lease != nil:
			c.Res = resp.Results[i].Lease.Store()
		case resp.Results[i].Error != nil:
			c.Err = storeError(resp.Results[i].Error)
			if c.Err == nil {
				p := resp.Results[i].Error
				c.Err = fmt.Errorf("baton client: POST /v1/locks/renew-batch: %w",
					&ProblemError{Status: p.Status, Code: p.Code, Title: p.Title, Detail: p.Detail, RetryAfter: msOf(p.RetryAfterMs)})
			}
		default:
			c.Err = fmt.Errorf("baton client: POST /v1/locks/renew-batch: result %d has neither a lease nor an error", i)
		}
	}
	return nil
}

// renewEach sends one renew request per call, a few at a time.
func (s *Store) renewEach(ctx context.Context, calls []*combine.Call[*store.RenewParams, *store.Lease]) {
	sem := make(chan struct{}, renewSlots)
	var wg sync.WaitGroup
	for _, c := range calls {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			c.Res, c.Err = s.renewOne(ctx, c.Req)
		}()
	}
	wg.Wait()
}
