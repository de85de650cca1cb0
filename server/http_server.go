package server

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"
)

// The connection timeouts of HTTPServer. Request bodies have their own deadline
// (Config.BodyTimeout, body_deadline.go); answers have none, since a long-poll may rightly wait
// up to MaxWait for its answer.
const (
	readHeaderTimeout = 10 * time.Second // a new connection's first request, too
	idleTimeout       = 2 * time.Minute
)

// HTTPServer returns the *http.Server that serves s, and the listener to pass to its Serve: ln
// under the connection cap (Config.MaxConns), with TLS over it when tlsConfig is set (a
// connection over the cap is then closed without an answer, which a TLS client could not read).
// baton serve runs exactly this, so tests that serve through it meet the binary's limits.
func (s *Server) HTTPServer(ln net.Listener, tlsConfig *tls.Config) (*http.Server, net.Listener) {
	hs := &http.Server{Handler: s.handler, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout}
	capped := &cappedListener{Listener: ln, cap: s.conns, answer: tlsConfig == nil}
	if tlsConfig == nil {
		return hs, capped
	}
	hs.TLSConfig = tlsConfig
	return hs, tls.NewListener(capped, tlsConfig)
}
