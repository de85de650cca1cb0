package wire

import "github.com/batonhq/baton/store"

// Rates of key prefixes (store.RatePrefixer): every grant of a key under a rated prefix counts
// against its rate.

// SetPrefixRateRequest is the body of PUT /v1/rates/{prefix}. Actor counts only on a server
// without auth.
type SetPrefixRateRequest struct {
	// Rate is "MAX/WINDOW", such as "20/1m" (store.Rate).
	Rate  string `json:"rate"`
	Actor string `json:"actor,omitempty"`
}

// PrefixRate is a rated key prefix.
type PrefixRate struct {
	Prefix string `json:"prefix"`
	Rate   string `json:"rate"`
	SetAt  Time   `json:"set_at"`
}

// PrefixRateFrom converts a store prefix rate.
func PrefixRateFrom(r *store.PrefixRate) PrefixRate {
	return PrefixRate{Prefix: r.Prefix, Rate: r.Rate.String(), SetAt: T(r.SetAt)}
}

// Store converts back (a rate that does not parse reads as the zero rate).
func (r *PrefixRate) Store() *store.PrefixRate {
	rate, _ := store.ParseRate("rate", r.Rate)
	return &store.PrefixRate{Prefix: r.Prefix, Rate: rate, SetAt: r.SetAt.UTC()}
}

// PrefixRateResponse answers PUT and GET /v1/rates/{prefix}.
type PrefixRateResponse struct {
	PrefixRate PrefixRate `json:"prefix_rate"`
}

// PrefixRatesResponse answers GET /v1/rates; NextCursor (the last prefix) is set when the page is
// full: pass it as cursor.
type PrefixRatesResponse struct {
	Rates      []PrefixRate `json:"rates"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// DeletePrefixRateResponse answers DELETE /v1/rates/{prefix}.
type DeletePrefixRateResponse struct {
	Prefix  string `json:"prefix"`
	Deleted bool   `json:"deleted"`
}
