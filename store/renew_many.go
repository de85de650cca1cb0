package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// MaxRenewMany bounds the renewals of one RenewMany call.
const MaxRenewMany = 1000

// RenewResult is the answer to one renewal of a RenewMany call: the renewed lease, or the error Renew
// would have returned for it alone (ErrNotHeld, …).
type RenewResult struct {
	Lease *Lease
	Err   error
}

// ValidateRenewMany checks the renewals of a RenewMany call before any of them runs: bad input
// anywhere rejects them all, with an error that names the renewal's index.
func ValidateRenewMany(ps []*RenewParams) error {
	if len(ps) == 0 {
		return invalid("leases", "must hold at least one renewal")
	}
	if len(ps) > MaxRenewMany {
		return invalid("leases", "must hold at most %d renewals, got %d", MaxRenewMany, len(ps))
	}
	for i, p := range ps {
		if p == nil {
			return invalid(fmt.Sprintf("leases[%d]", i), "must not be null")
		}
		if err := p.Validate(); err != nil {
			var ia *InvalidArgumentError
			if errors.As(err, &ia) {
				return &InvalidArgumentError{Field: fmt.Sprintf("leases[%d].%s", i, ia.Field), Rule: ia.Rule}
			}
			return err
		}
	}
	return nil
}

// RenewMany renews every lease of ps: in one call if st is a ManyRenewer, otherwise with one
// Renew each, a few at a time.
func RenewMany(ctx context.Context, st Store, ps []*RenewParams) ([]RenewResult, error) {
	if err := ValidateRenewMany(ps); err != nil {
		return nil, err
	}
	if mr, ok := st.(ManyRenewer); ok {
		return mr.RenewMany(ctx, ps)
	}
	const parallel = 8
	out := make([]RenewResult, len(ps))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, p := range ps {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i].Lease, out[i].Err = st.Renew(ctx, p)
		}()
	}
	wg.Wait()
	return out, nil
}
