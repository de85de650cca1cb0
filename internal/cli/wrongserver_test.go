package cli

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A --server with a wrong path prefix, or a server that is not Baton's, must be an error (exit
// 1) saying so, never "free" or "no live lease"; and a web page's HTML is not dumped.
func TestWrongServerOrPrefix(t *testing.T) {
	f := newFixture(t, nil)
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, "<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head><body><h1>Not Found</h1><p>secret-page-body</p></body></html>")
	}))
	t.Cleanup(html.Close)

	for _, base := range []string{f.url + "/wrong-prefix", html.URL, html.URL + "/baton"} {
		for _, args := range [][]string{
			{"locks", "status", "x"},
			{"locks", "list"},
			{"jobs", "list"},
			{"jobs", "show", "1"},
			{"run", "--lock", "k", "--", "true"},
		} {
			r := cli(t, append([]string{"--server", base}, args...)...)
			want := "not a Baton server or wrong path: " + base
			if r.code != exitError || !strings.Contains(r.stderr, want) {
				t.Errorf("baton --server %s %q: %s\nwant exit 1 and %q", base, args, r, want)
			}
			if strings.Contains(r.stdout+r.stderr, "free") || strings.Contains(r.stderr, "no live lease") ||
				strings.Contains(r.stderr, "not found") || strings.Contains(r.stderr, "secret-page-body") || strings.Contains(r.stderr, "<html") {
				t.Errorf("baton --server %s %q: %s\nreads the 404 as a missing lease or dumps the page", base, args, r)
			}
		}
	}
	// The right prefix still says free.
	if r := f.cli(t, "locks", "status", "x"); r.code != exitOK || !strings.Contains(r.stdout, "x is free") {
		t.Errorf("locks status on the right server: %s", r)
	}
}
