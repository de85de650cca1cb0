package server

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/batonhq/baton/store"
)

// The Host check stops DNS rebinding. A page of evil.example whose name the attacker then points
// at 127.0.0.1 is, to the browser, on the same origin as a loopback server: its requests pass
// the cross-origin check (origin.go) and, without auth, every caller is admin. Only the Host
// header still carries the page's name. So a server without auth answers only Host names that
// cannot be rebound: loopback IP addresses, localhost and *.localhost (browsers resolve those to
// loopback themselves and never ask DNS; the names cannot be registered), its listen address,
// and the names the operator allows. With auth, a page gets nothing without a token, which a
// browser never sends on its own, so the Host is checked only when names are allowed
// explicitly. A request without a Host (HTTP/1.0) comes from no browser and passes.

// hostCheck holds the names a server answers besides loopback ones; nil checks nothing.
type hostCheck struct {
	names []string // lower case, without a trailing dot or brackets
}

// newHostCheck returns the check of a server: with auth, only when allowed names are given.
func newHostCheck(withAuth bool, allowed []string, listenAddr string) (*hostCheck, error) {
	if withAuth && len(allowed) == 0 {
		return nil, nil
	}
	hc := &hostCheck{}
	for _, a := range allowed {
		name, ok := hostName(a, false)
		if !ok {
			return nil, &store.InvalidArgumentError{Field: "allowed_host", Rule: fmt.Sprintf("must be a host name or an IP address, without a port (got %q)", a)}
		}
		hc.names = append(hc.names, name)
	}
	if listenAddr != "" {
		if host, _, err := net.SplitHostPort(listenAddr); err == nil {
			if ip, err := netip.ParseAddr(host); host != "" && (err != nil || !ip.IsUnspecified()) {
				if name, ok := hostName(host, false); ok {
					hc.names = append(hc.names, name)
				}
			}
		}
	}
	return hc, nil
}

// hostName normalises the name of a Host header (withPort: it may carry a port) or of an
// allowed host: lower case, no port, no brackets, no trailing dot. ok is false for a value that
// is not a name or an IP address.
func hostName(h string, withPort bool) (string, bool) {
	if withPort {
		if host, _, err := net.SplitHostPort(h); err == nil {
			h = host
		}
	}
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if h == "" {
		return "", false
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return h, true
	}
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return "", false
		}
	}
	return h, true
}

// allows reports whether a request's Host may be answered.
func (hc *hostCheck) allows(host string) bool {
	if hc == nil || host == "" {
		return true
	}
	name, ok := hostName(host, true)
	if !ok {
		return false
	}
	if ip, err := netip.ParseAddr(name); err == nil && ip.Unmap().IsLoopback() {
		return true
	}
	return name == "localhost" || strings.HasSuffix(name, ".localhost") || slices.Contains(hc.names, name)
}

// checkHost answers 403 to a request whose Host the server does not answer.
func (s *Server) checkHost(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hosts.allows(r.Host) {
			s.refusals.refused(r, reasonHost, "")
			rule := "a server without --auth-file answers only loopback names (localhost, 127.0.0.1, [::1]) and its listen address, so that a web page cannot reach it by DNS rebinding"
			if s.cfg.Auth != nil {
				rule = "this server answers only loopback names, its listen address and its allowed hosts"
			}
			writeProblem(w, newProblem(http.StatusForbidden, "forbidden", fmt.Sprintf(
				"Host %q is not allowed: %s; if clients reach the server by this name, start it with --allowed-host %s",
				r.Host, rule, suggestedName(r.Host))))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// suggestedName is the name to allow for a refused Host, or a placeholder if it is not one.
func suggestedName(host string) string {
	if name, ok := hostName(host, true); ok {
		return name
	}
	return "NAME"
}
