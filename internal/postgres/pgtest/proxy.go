package pgtest

import (
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// Proxy stands between the service and the test server, so a test can make the
// database unreachable (Stop) or slow (Hold) without touching the real server.
type Proxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	cond    *sync.Cond
	stopped bool
	held    bool
	conns   []net.Conn
	// waiting counts the pipes that read bytes and wait for Release.
	waiting int
}

// NewProxy forwards a loopback port to cfg's server and returns the proxy and
// cfg pointed at it. It closes when t ends.
func NewProxy(t testing.TB, cfg postgres.Config) (*Proxy, postgres.Config) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: net.JoinHostPort(cfg.Host, itoa(cfg.Port))}
	p.cond = sync.NewCond(&p.mu)
	t.Cleanup(func() { _ = ln.Close(); p.Release(); p.Stop() })
	go p.accept()
	cfg.Host, cfg.Port = "127.0.0.1", ln.Addr().(*net.TCPAddr).Port
	return p, cfg
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		stopped := p.stopped
		p.mu.Unlock()
		up, err := net.Dial("tcp", p.target)
		if stopped || err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go p.pipe(up, c)
		go p.pipe(c, up)
	}
}

// pipe copies src to dst, waiting while the proxy is held.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if p.held {
				p.waiting++
				for p.held {
					p.cond.Wait()
				}
				p.waiting--
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Waiting reports how many reads the held proxy keeps from the other side:
// a statement sent while it is held counts, so a test knows its request
// reached the database.
func (p *Proxy) Waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waiting
}

// Stop closes every connection and refuses new ones, as a stopped server would.
func (p *Proxy) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// Start accepts connections again.
func (p *Proxy) Start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = false
}

// Hold stops forwarding bytes, so every query in flight waits until Release.
func (p *Proxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = true
}

// Release resumes forwarding.
func (p *Proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = false
	p.cond.Broadcast()
}

func itoa(n int) string { return strconv.Itoa(n) }
