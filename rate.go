package baton

import "github.com/batonhq/baton/store"

// ParseRate reads a rate's text form, "MAX/WINDOW" such as "3/1h" (units s, m, h, d, or a Go
// duration), for Kind.Rate; out of bounds is an *InvalidArgumentError naming rate.max or
// rate.window.
func ParseRate(s string) (Rate, error) { return store.ParseRate("rate", s) }

// CodeRateLimited is the error code of a job skipped (skip policy) because its kind's rate on
// its resource was reached at the submit; JobError.Until is when the window frees.
const CodeRateLimited = store.CodeRateLimited
