package server

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"
)

// DefaultBodyTimeout is the default of Config.BodyTimeout.
const DefaultBodyTimeout = 10 * time.Second

// refusalDrain is how long a connection whose request is refused before its body was read
// still reads what the client already sent (so that closing it does not reset the connection
// under the answer, as net/http's own 500 ms wait for that): long enough for a body in flight,
// too short for a client that sends none to hold the connection.
const refusalDrain = 500 * time.Millisecond

// errBodyTimeout is a body that did not arrive within the body deadline.
var errBodyTimeout = errors.New("the request body did not arrive in time")

// bodyDeadline bounds the reading of request bodies: the deadline is set on the connection when
// the handler starts (the headers were just read). net/http lifts it itself once the body has
// been read to its end (when it starts reading the connection in the background), so a
// long-poll (acquire, claim), whose small body arrives at once, may still wait up to MaxWait for
// its answer; and no write deadline is set, so that answer is never cut. The deadline is set
// here rather than as http.Server.ReadTimeout so that it also holds where the handler is served
// by another http.Server, and counts from the end of the headers.
//
// A request refused with 401, 403, 408 or 413 before its body was read closes its connection
// (Connection: close) and reads what is left of the body only briefly (refusalDrain): net/http
// would otherwise wait for the whole body before answering, then for it again before closing,
// so that a client could hold a connection open with a Content-Length and no body, no token
// needed.
func (s *Server) bodyDeadline(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		// One allocation for the body and the writer.
		g := &bodyGuard{body: deadlineBody{ReadCloser: r.Body, rc: *http.NewResponseController(w)}}
		b := &g.body
		if s.cfg.BodyTimeout > 0 {
			b.deadline = time.Now().Add(s.cfg.BodyTimeout)
			// Not every ResponseWriter has a connection (a test's recorder): then no deadline.
			b.timed = b.rc.SetReadDeadline(b.deadline) == nil
		}
		r.Body = b
		g.w = refusalWriter{ResponseWriter: w, r: r, body: b}
		h.ServeHTTP(&g.w, r)
	})
}

// bodyGuard is a request's deadlineBody and refusalWriter.
type bodyGuard struct {
	body deadlineBody
	w    refusalWriter
}

// deadlineBody is a request body under the body deadline.
type deadlineBody struct {
	io.ReadCloser
	rc       http.ResponseController
	deadline time.Time
	timed    bool // the deadline is set on the connection
	complete bool // read to its end
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.complete = true
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = errBodyTimeout
	}
	return n, err
}

// refusalWriter closes the connection of a request refused before its body was read.
type refusalWriter struct {
	http.ResponseWriter
	r       *http.Request
	body    *deadlineBody
	written bool
}

func (w *refusalWriter) WriteHeader(code int) {
	if !w.written {
		w.written = true
		switch code {
		case http.StatusUnauthorized, http.StatusForbidden, http.StatusRequestTimeout, http.StatusRequestEntityTooLarge:
			if !w.body.complete {
				w.closeUnread()
			}
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *refusalWriter) Write(p []byte) (int, error) {
	w.written = true
	return w.ResponseWriter.Write(p)
}

func (w *refusalWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// closeUnread asks net/http to close the connection after the answer instead of reading the
// rest of the body, and shortens the wait for what the client has already sent. (HTTP/2 needs
// neither: an unread body ends its stream, not the connection.)
func (w *refusalWriter) closeUnread() {
	if w.r.ProtoMajor != 1 {
		return
	}
	w.Header().Set("Connection", "close")
	if d := time.Now().Add(refusalDrain); !w.body.timed || d.Before(w.body.deadline) {
		_ = w.body.rc.SetReadDeadline(d)
	}
}
