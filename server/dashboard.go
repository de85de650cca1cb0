package server

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/batonhq/baton/internal/dashboard"
)

// dashboard serves the web dashboard's page and assets (docs/dashboard.md) without auth: they
// hold no data, and the page calls the API with the token the operator enters. Any other
// unknown path is a problem document, as before.
func (s *Server) dashboard() http.Handler {
	ui := dashboard.Handler(http.HandlerFunc(notFound))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if r.URL.Path != "/" {
				notFound(w, r)
				return
			}
			w.Header().Set("Allow", "GET, HEAD")
			writeProblem(w, newProblem(http.StatusMethodNotAllowed, "method_not_allowed",
				fmt.Sprintf("%s %s: use GET", r.Method, r.URL.Path)))
			return
		}
		ui.ServeHTTP(w, r)
	})
}

// isDashboardPath reports whether path is the dashboard's page or one of its assets.
func isDashboardPath(path string) bool {
	return path == "/" || strings.HasPrefix(path, "/ui/")
}
