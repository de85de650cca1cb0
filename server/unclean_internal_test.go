package server

import "testing"

func TestHasUncleanSegment(t *testing.T) {
	for p, want := range map[string]bool{
		"": false, "/": false, "/v1/locks/a": false, "/v1/locks/a/": false, "/v1/locks/a.b": false, "/v1/locks/...": false,
		"/v1/locks/%2E%2E": false, "//": true, "/v1//locks": true, "/v1/locks/./a": true, "/v1/locks/..": true,
		"/v1/locks/a/..": true, "/v1/locks/.": true, "/v1/locks/a//": true, "/./": true, "/..": true, ".": true,
	} {
		if got := hasUncleanSegment(p); got != want {
			t.Errorf("hasUncleanSegment(%q) = %v, want %v", p, got, want)
		}
	}
}
