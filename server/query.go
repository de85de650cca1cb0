package server

import (
	"net/http"
	"net/url"
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
