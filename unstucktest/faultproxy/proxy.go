// Package faultproxy is a TCP proxy between an application and a
// PostgreSQL server that injects faults on demand, for fault experiments:
// drop every connection now, drop connections at random, delay
// messages, blackhole all traffic, and cut a chosen SQL statement either
// before the server sees it or after the server has answered it.
//
// It reads the PostgreSQL frontend protocol just enough to see statements:
// Query ('Q') messages, and Parse ('P') / Bind ('B') of the extended
// protocol, mapping each prepared statement's name to its SQL so that a
// Bind of a cached statement (pgx prepares and caches statements) is
// matched by its text. It does not support TLS: connect with
// sslmode=disable.
//
// It is a test tool: it never inspects or logs parameter values.
//
// It is test support for this repository's suites, public so that the
// library's tests, the console's and the tools share it; adopters may use
// it, with no compatibility promise before v1.
package faultproxy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Cut selects statements to cut. A statement is cut when Match returns true
// for its SQL text, with probability P.
type Cut struct {
	// Match reports whether the statement with this SQL text is a target.
	Match func(sql string) bool
	// After cuts the connection once the server has answered the statement
	// (its ReadyForQuery): in autocommit the server committed it, and the
	// client never hears so. Otherwise the connection is cut before the
	// statement is forwarded, so the server never sees it.
	After bool
	// P is the probability, 0 to 1, that a matching statement is cut.
	P float64
}

// Stats counts what the proxy did since it started.
type Stats struct {
	Accepted    int64 // client connections accepted
	DropAll     int64 // connections closed by DropAll
	RandomDrops int64 // connections closed by the per-message drop probability
	Delayed     int64 // messages delayed
	CutBefore   int64 // statements cut before the server saw them
	CutAfter    int64 // statements whose answer was withheld and the connection cut
}

// Faults is the number of faults injected: connections dropped, messages
// delayed and statements cut.
func (s Stats) Faults() int64 {
	return s.DropAll + s.RandomDrops + s.Delayed + s.CutBefore + s.CutAfter
}

// Proxy forwards connections from its listening address to a target and
// injects the faults it is told to. Its methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string

	mu        sync.Mutex
	conns     map[*conn]struct{}
	closed    bool
	dropP     float64
	delay     time.Duration
	delayP    float64
	cut       *Cut
	gate      chan struct{} // closed while traffic flows; open while blackholed
	blackhole bool

	wg sync.WaitGroup

	accepted, dropAll, randomDrops, delayed, cutBefore, cutAfter atomic.Int64
}

// Listen starts a proxy on a free port of 127.0.0.1 that forwards to
// target (host:port).
func Listen(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	gate := make(chan struct{})
	close(gate)
	p := &Proxy{ln: ln, target: target, conns: map[*conn]struct{}{}, gate: gate}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops listening, closes every connection and waits for the
// proxy's goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	if p.blackhole {
		p.blackhole = false
		close(p.gate)
	}
	conns := p.snapshot()
	p.mu.Unlock()
	err := p.ln.Close()
	for _, c := range conns {
		c.close()
	}
	p.wg.Wait()
	return err
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	return Stats{
		Accepted: p.accepted.Load(), DropAll: p.dropAll.Load(), RandomDrops: p.randomDrops.Load(),
		Delayed: p.delayed.Load(), CutBefore: p.cutBefore.Load(), CutAfter: p.cutAfter.Load(),
	}
}

// DropAll closes every open connection now and returns how many it closed.
func (p *Proxy) DropAll() int {
	p.mu.Lock()
	conns := p.snapshot()
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	p.dropAll.Add(int64(len(conns)))
	return len(conns)
}

// SetDropProbability makes each message from a client close its
// connection with probability prob: half of the drops before the message
// is forwarded, half just after. 0 turns it off.
func (p *Proxy) SetDropProbability(prob float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropP = prob
}

// SetDelay holds each message from a client for d before forwarding it,
// with probability prob. A zero d or prob turns it off.
func (p *Proxy) SetDelay(d time.Duration, prob float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay, p.delayP = d, prob
}

// SetBlackhole on stops all forwarding, in both directions, while keeping
// every socket open: new connections are accepted but not connected to
// the target, and bytes already read are held. Off lets everything held
// flow again.
func (p *Proxy) SetBlackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on == p.blackhole || p.closed {
		return
	}
	p.blackhole = on
	if on {
		p.gate = make(chan struct{})
	} else {
		close(p.gate)
	}
}

// SetCut sets the statements to cut; nil turns cutting off.
func (p *Proxy) SetCut(c *Cut) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c != nil {
		cp := *c
		c = &cp
	}
	p.cut = c
}

// Clear turns every fault off: drops, delay, blackhole and cut.
func (p *Proxy) Clear() {
	p.SetDropProbability(0)
	p.SetDelay(0, 0)
	p.SetCut(nil)
	p.SetBlackhole(false)
}

// snapshot lists the open connections; p.mu must be held.
func (p *Proxy) snapshot() []*conn {
	out := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		out = append(out, c)
	}
	return out
}

// faults returns the current settings and the blackhole gate.
func (p *Proxy) faults() (dropP float64, delay time.Duration, delayP float64, cut *Cut, gate chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropP, p.delay, p.delayP, p.cut, p.gate
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.accepted.Add(1)
		c := &conn{p: p, client: client, stmts: map[string]string{}, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = client.Close()
			return
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go c.run()
	}
}

// conn is one proxied connection.
type conn struct {
	p      *Proxy
	client net.Conn

	mu       sync.Mutex
	server   net.Conn
	stmts    map[string]string // prepared statement name → SQL (frontend goroutine only)
	done     chan struct{}     // closed by close
	closeOne sync.Once

	rawReplies atomic.Int32 // single-byte answers owed for SSL/GSS requests
	armed      atomic.Bool  // a statement is to be cut after its answer
}

// close closes both sides once.
func (c *conn) close() {
	c.closeOne.Do(func() {
		close(c.done)
		_ = c.client.Close()
		c.mu.Lock()
		if c.server != nil {
			_ = c.server.Close()
		}
		c.mu.Unlock()
	})
}

// wait blocks while the proxy is blackholed; false if the connection was
// closed meanwhile.
func (c *conn) wait() bool {
	_, _, _, _, gate := c.p.faults()
	select {
	case <-gate:
		return true
	case <-c.done:
		return false
	}
}

func (c *conn) run() {
	defer c.p.wg.Done()
	defer func() {
		c.close()
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
	}()
	if !c.wait() {
		return
	}
	server, err := net.DialTimeout("tcp", c.p.target, 5*time.Second)
	if err != nil {
		return
	}
	c.mu.Lock()
	c.server = server
	c.mu.Unlock()
	select {
	case <-c.done: // closed while dialing
		_ = server.Close()
		return
	default:
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer c.close()
		c.backend(server)
	}()
	c.frontend(server)
	c.close()
	wg.Wait()
}

// Protocol codes of untyped startup-phase messages.
const (
	codeSSLRequest    = 80877103
	codeGSSENCRequest = 80877104
	codeCancelRequest = 80877102
)

// maxMessage bounds one protocol message (1 GiB, as the server does).
const maxMessage = 1 << 30

// frontend forwards client messages to the server, injecting faults.
func (c *conn) frontend(server net.Conn) {
	r := bufio.NewReaderSize(c.client, 32<<10)
	w := bufio.NewWriterSize(server, 32<<10)
	startup := true
	for {
		msg, typ, body, err := readFrontend(r, startup)
		if err != nil {
			return
		}
		if startup {
			code := uint32(0)
			if len(body) >= 4 {
				code = binary.BigEndian.Uint32(body[:4])
			}
			switch code {
			case codeSSLRequest, codeGSSENCRequest:
				c.rawReplies.Add(1)
			default:
				startup = false
			}
		} else if !c.inject(w, typ, body) {
			return
		}
		if !c.forward(w, r, msg) {
			return
		}
	}
}

// inject applies the faults to one typed client message before it is
// forwarded; false means the connection was cut.
func (c *conn) inject(w *bufio.Writer, typ byte, body []byte) bool {
	dropP, delay, delayP, cut, _ := c.p.faults()
	if dropP > 0 && rand.Float64() < dropP {
		c.p.randomDrops.Add(1)
		if rand.IntN(2) == 0 { // after: forward what is buffered first
			_ = w.Flush()
		}
		return false
	}
	if delay > 0 && delayP > 0 && rand.Float64() < delayP {
		c.p.delayed.Add(1)
		if w.Flush() != nil {
			return false
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-c.done:
			t.Stop()
			return false
		}
	}
	var sql string
	var isStatement bool
	switch typ {
	case 'P':
		name, rest, ok := cstring(body)
		if q, _, ok2 := cstring(rest); ok && ok2 {
			c.stmts[name] = q
		}
	case 'C': // Close of a statement: forget its text
		if len(body) > 1 && body[0] == 'S' {
			if name, _, ok := cstring(body[1:]); ok {
				delete(c.stmts, name)
			}
		}
	case 'B':
		_, rest, ok := cstring(body)
		if stmt, _, ok2 := cstring(rest); ok && ok2 {
			sql, isStatement = c.stmts[stmt], true
		}
	case 'Q':
		sql, _, isStatement = cstring(body)
	}
	if !isStatement || cut == nil || cut.Match == nil || !cut.Match(sql) || rand.Float64() >= cut.P {
		return true
	}
	if !cut.After {
		c.p.cutBefore.Add(1)
		return false
	}
	c.armed.Store(true)
	return true
}

// backend forwards server messages to the client; once a statement is
// armed for cutting, it withholds them and cuts at the next ReadyForQuery.
func (c *conn) backend(server net.Conn) {
	r := bufio.NewReaderSize(server, 32<<10)
	w := bufio.NewWriterSize(c.client, 32<<10)
	for {
		var msg []byte
		if c.rawReplies.Load() > 0 {
			b, err := r.ReadByte()
			if err != nil {
				return
			}
			c.rawReplies.Add(-1)
			msg = []byte{b}
		} else {
			m, typ, _, err := readTyped(r)
			if err != nil {
				return
			}
			if c.armed.Load() {
				if typ == 'Z' {
					c.p.cutAfter.Add(1)
					return
				}
				continue
			}
			msg = m
		}
		if !c.forward(w, r, msg) {
			return
		}
	}
}

// forward writes msg once the blackhole lets it, flushing when nothing more
// is buffered on the reading side; false when the connection is done.
func (c *conn) forward(w *bufio.Writer, r *bufio.Reader, msg []byte) bool {
	if !c.wait() {
		return false
	}
	if _, err := w.Write(msg); err != nil {
		return false
	}
	return r.Buffered() > 0 || w.Flush() == nil
}

// readFrontend reads one client message: untyped (length first) in the
// startup phase, typed otherwise. It returns the whole message, its type
// (0 when untyped) and its body.
func readFrontend(r *bufio.Reader, startup bool) (msg []byte, typ byte, body []byte, err error) {
	if !startup {
		return readTyped(r)
	}
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 4 || n > maxMessage {
		return nil, 0, nil, errors.New("faultproxy: bad startup length")
	}
	msg = make([]byte, n)
	copy(msg, hdr[:])
	if _, err := io.ReadFull(r, msg[4:]); err != nil {
		return nil, 0, nil, err
	}
	return msg, 0, msg[4:], nil
}

// readTyped reads one typed message: a type byte, a length that counts
// itself, and the body.
func readTyped(r *bufio.Reader) (msg []byte, typ byte, body []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n < 4 || n > maxMessage {
		return nil, 0, nil, errors.New("faultproxy: bad message length")
	}
	msg = make([]byte, 1+n)
	copy(msg, hdr[:])
	if _, err := io.ReadFull(r, msg[5:]); err != nil {
		return nil, 0, nil, err
	}
	return msg, hdr[0], msg[5:], nil
}

// cstring splits a NUL-terminated string off b.
func cstring(b []byte) (s string, rest []byte, ok bool) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return "", nil, false
	}
	return string(b[:i]), b[i+1:], true
}
