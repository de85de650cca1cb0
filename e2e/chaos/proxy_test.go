package chaos

import (
	"net"
	"sync"
	"testing"
	"time"
)

// proxy is a TCP proxy between the clients and `baton serve`: it passes bytes through, delays
// each chunk, or cuts every connection and refuses new ones, as the faults decide. Each new
// connection goes to target or, if target refuses it, to the first of fallbacks that accepts
// (a load balancer in front of several replicas, whose health check is the connect).
type proxy struct {
	ln        net.Listener
	target    string
	fallbacks []string
	url       string

	mu    sync.Mutex
	delay time.Duration
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func startProxy(t *testing.T, target string, fallbacks ...string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, fallbacks: fallbacks, url: "http://" + ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			reset(c)
			continue
		}
		p.wg.Add(1)
		go p.handle(c)
	}
}

// reset closes c with an RST, as a refused or broken connection looks to the client.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func (p *proxy) handle(c net.Conn) {
	defer p.wg.Done()
	d, err := net.Dial("tcp", p.target)
	for _, f := range p.fallbacks {
		if err == nil {
			break
		}
		d, err = net.Dial("tcp", f)
	}
	if err != nil {
		reset(c)
		return
	}
	if !p.track(c, d) {
		reset(c)
		reset(d)
		return
	}
	done := make(chan struct{}, 2)
	go func() { p.pipe(d, c); done <- struct{}{} }()
	go func() { p.pipe(c, d); done <- struct{}{} }()
	<-done
	reset(c)
	reset(d)
	<-done
	p.untrack(c, d)
}

func (p *proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			delay := p.delay
			p.mu.Unlock()
			if delay > 0 {
				time.Sleep(delay) // the fault being injected: a slow network
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// setDelay delays every chunk by d from now on (0: pass through).
func (p *proxy) setDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// setCut cuts every connection and refuses new ones (true), or accepts them again (false).
func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	p.cut = cut
	var open []net.Conn
	if cut {
		for c := range p.conns {
			open = append(open, c)
		}
	}
	p.mu.Unlock()
	for _, c := range open {
		reset(c)
	}
}

func (p *proxy) close() {
	_ = p.ln.Close()
	p.setCut(true)
	p.wg.Wait()
}
