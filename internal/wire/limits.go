package wire

import "github.com/batonhq/baton/store"

// Limits (store.Limiter): named capacities of which a grant takes one unit each
// (AcquireRequest.Limits).

// SetLimitRequest is the body of PUT /v1/limits/{name}. Actor counts only on a server without
// auth; with auth the token's name is recorded.
type SetLimitRequest struct {
	Capacity int `json:"capacity"`
	// Rate, "MAX/WINDOW" such as "20/1m" (store.Rate), bounds the grants of the limit's units
	// per sliding window; absent: none (a set without it removes the limit's rate).
	Rate  string `json:"rate,omitempty"`
	Actor string `json:"actor,omitempty"`
}

// StoreRate reads the request's rate (nil if none); a bad one is an *InvalidArgumentError naming
// rate, rate.max or rate.window.
func (r *SetLimitRequest) StoreRate() (*store.Rate, error) { return optionalRate(r.Rate) }

func optionalRate(text string) (*store.Rate, error) {
	if text == "" {
		return nil, nil
	}
	r, err := store.ParseRate("rate", text)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// Limit is the limit object: its capacity and its use, read at one instant.
type Limit struct {
	Name     string `json:"name"`
	Capacity int    `json:"capacity"`
	// Rate is the limit's rate, "MAX/WINDOW"; absent: none.
	Rate string `json:"rate,omitempty"`
	// InUse is the number of live leases holding a unit; it may exceed Capacity after the
	// capacity was lowered, until they end.
	InUse int `json:"in_use"`
	// Holders are the live leases holding a unit, in grant order (lease IDs shown as for any
	// lease).
	Holders []Lease `json:"holders"`
	// Waiting is the number of requests waiting in the limit's line.
	Waiting   int  `json:"waiting"`
	UpdatedAt Time `json:"updated_at"`
}

// LimitFrom converts a store limit; holders is how each holding lease is shown to the caller.
func LimitFrom(l *store.Limit, holder func(*store.Lease) Lease) Limit {
	out := Limit{Name: l.Name, Capacity: l.Capacity, Rate: rateText(l.Rate), InUse: l.InUse, Holders: make([]Lease, 0, len(l.Holders)),
		Waiting: l.Waiting, UpdatedAt: T(l.UpdatedAt)}
	for _, h := range l.Holders {
		out.Holders = append(out.Holders, holder(h))
	}
	return out
}

// Store converts back to a store limit.
func (l *Limit) Store() *store.Limit {
	out := &store.Limit{Name: l.Name, Capacity: l.Capacity, InUse: l.InUse, Waiting: l.Waiting, UpdatedAt: l.UpdatedAt.UTC()}
	out.Rate, _ = optionalRate(l.Rate)
	for i := range l.Holders {
		out.Holders = append(out.Holders, l.Holders[i].Store())
	}
	return out
}

// LimitResponse answers PUT and GET /v1/limits/{name}.
type LimitResponse struct {
	Limit Limit `json:"limit"`
}

// LimitsResponse answers GET /v1/limits; NextCursor (the last name) is set when the page is
// full: pass it as cursor.
type LimitsResponse struct {
	Limits     []Limit `json:"limits"`
	NextCursor string  `json:"next_cursor,omitempty"`
}

// DeleteLimitResponse answers DELETE /v1/limits/{name}.
type DeleteLimitResponse struct {
	Name    string `json:"name"`
	Deleted bool   `json:"deleted"`
}
