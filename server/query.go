package server

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// query parses the request's query string. r.URL.Query() silently drops a parameter that is not
// well formed (a bad %-escape, a ';'), so that "?holder=%zz" would list every holder's leases;
// here it is a 400 naming the parameter, as is a parameter given twice. The values' text is checked by the store's Validate
// (valid UTF-8, no control characters), on every backend.
func query(w http.ResponseWriter, r *http.Request) (url.Values, bool) {
	q := url.Values{}
	for pair := range strings.SplitSeq(r.URL.RawQuery, "&") {
		if pair == "" {
			continue
		}
		rawKey, rawValue, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(rawKey)
		if err != nil {
			writeProblem(w, invalidArg("query", "must be a well-formed query string ("+err.Error()+")"))
			return nil, false
		}
		if strings.Contains(rawKey, ";") || strings.Contains(rawValue, ";") {
			writeProblem(w, invalidArg(key, "must not contain ';' (escape it as %3B)"))
			return nil, false
		}
		value, err := url.QueryUnescape(rawValue)
		if err != nil {
			writeProblem(w, invalidArg(key, "must be %-escaped correctly ("+err.Error()+")"))
			return nil, false
		}
		if q.Has(key) {
			// Every parameter takes one value: a repeat (?state=a&state=b) would otherwise be
			// half ignored. The CLI asks once per value and merges.
			writeProblem(w, invalidArg(key, "must be given once (several values in one request are not supported)"))
			return nil, false
		}
		q.Add(key, value)
	}
	return q, true
}

// queryOnly is query for a route that takes only the parameters allowed: any other is a 400
// naming it, "is not a parameter of " + what (the allowed ones listed).
func queryOnly(w http.ResponseWriter, r *http.Request, what string, allowed ...string) (url.Values, bool) {
	q, ok := query(w, r)
	if !ok {
		return nil, false
	}
	for k := range q {
		if !slices.Contains(allowed, k) {
			writeProblem(w, invalidArg(k, fmt.Sprintf("is not a parameter of %s (%s)", what, strings.Join(allowed, ", "))))
			return nil, false
		}
	}
	return q, true
}
