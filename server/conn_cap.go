package server

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxConns is the default of Config.MaxConns, lowered to half the process's limit of open
// files where that is lower, so that the store, the logs and the connections already open keep
// descriptors however many clients connect.
const DefaultMaxConns = 1024

// connCap bounds the connections open at once on a server's listeners. A connection over the
// bound is accepted, answered 503 at once and closed: it costs a descriptor for an instant, and
// the client learns to retry instead of waiting in the kernel's backlog
// (golang.org/x/net/netutil.LimitListener stops accepting instead, which leaves clients
// waiting with no answer while the bound holds).
type connCap struct {
	max     int64 // <= 0: no bound
	open    atomic.Int64
	refused prometheus.Counter
	// refusal is the raw HTTP/1.1 answer written to a refused plain-text connection.
	refusal []byte
}

func newConnCap(max int, reg prometheus.Registerer) *connCap {
	c := &connCap{max: int64(max)}
	c.refused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "baton_http_connections_refused_total",
		Help: "Connections closed at accept, answered 503, because the server had its maximum open (--max-conns).",
	})
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "baton_http_connections_open",
		Help: "Client connections open (at most --max-conns).",
	}, func() float64 { return float64(c.open.Load()) })
	reg.MustRegister(c.refused, open)
	p := newProblem(http.StatusServiceUnavailable, "overloaded",
		fmt.Sprintf("the server has its maximum of %d connections open; retry later", max))
	p.RetryAfterMs = ms(overloadRetryAfter)
	body, _ := json.Marshal(p.Problem)
	c.refusal = fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\n"+
		"Retry-After: %d\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s\n",
		int(overloadRetryAfter.Seconds()), len(body)+1, body)
	return c
}

// take counts a new connection in, or returns false if the server has its maximum open.
func (c *connCap) take() bool {
	if n := c.open.Add(1); c.max > 0 && n > c.max {
		c.open.Add(-1)
		return false
	}
	return true
}

// cappedListener applies a connCap to the connections it accepts.
type cappedListener struct {
	net.Listener
	cap *connCap
	// answer: write the 503 to a refused connection (plain HTTP; a TLS client could not read it).
	answer bool
}

func (l *cappedListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.cap.take() {
			return &cappedConn{Conn: conn, cap: l.cap}, nil
		}
		l.cap.refused.Inc()
		if l.answer {
			// A new connection's send buffer is empty: the write does not wait for the client.
			_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = conn.Write(l.cap.refusal)
		}
		_ = conn.Close()
	}
}

// cappedConn gives its place back when closed.
type cappedConn struct {
	net.Conn
	cap  *connCap
	once sync.Once
}

func (c *cappedConn) Close() error {
	c.once.Do(func() { c.cap.open.Add(-1) })
	return c.Conn.Close()
}

// CloseWrite lets net/http half-close the connection before closing it, as it does for a
// *net.TCPConn, so that a client reads the last answer before the close resets the connection.
func (c *cappedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
