// Package faultproxy is an in-process TCP proxy for tests that puts network faults
// between a client (the bridge) and a STOMP or AMQP 1.0 broker: cuts at chosen
// frames, half-open black holes, latency and bandwidth limits.
//
// It reads each direction frame by frame (a small STOMP or AMQP 1.0 sniffer, picked
// by the stream's first bytes, that keeps the bytes exactly as they came), so a test
// can cut a connection at a point of the protocol — after the SENDs before their
// COMMIT, after a COMMIT before its RECEIPT, after the RECEIPT before the local
// ACK; over AMQP 1.0 after the transfers before their dispositions, or before the
// receiver's disposition — instead of at a random moment. Bytes that do not parse
// are passed on unchanged in raw mode.
package faultproxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Dir is the direction a frame travels.
type Dir int

// Directions.
const (
	ToServer Dir = iota // client (bridge) → broker
	ToClient            // broker → client
)

func (d Dir) String() string {
	if d == ToServer {
		return "to-server"
	}
	return "to-client"
}

// Frame is what the sniffer saw of one frame.
type Frame struct {
	Dir  Dir
	Conn int // connection number, 1-based, in accept order
	// Command is the STOMP command, or the AMQP 1.0 performative in upper case
	// (AMQPTransfer, …; AMQPHeader for a protocol header); "" for a heart-beat (a
	// bare end-of-line, an empty AMQP frame) and "RAW" for bytes that did not
	// parse.
	Command string
	// Header holds the key, value pairs as on the wire (escaped, repeats kept).
	// For AMQP 1.0: "channel" and the performative's leading fields by their
	// spec names ("handle", "delivery-id", "settled", "role" as sender or
	// receiver, "first", "last", "state" as accepted, released, …).
	Header []string
	// Size is the frame's length on the wire.
	Size int
}

// Get returns the first value of key, or "".
func (f Frame) Get(key string) string {
	for i := 0; i+1 < len(f.Header); i += 2 {
		if f.Header[i] == key {
			return f.Header[i+1]
		}
	}
	return ""
}

// Action is what a rule decides for a frame.
type Action int

// Actions.
const (
	Pass      Action = iota // forward the frame
	CutBefore               // cut the connection; the frame is not forwarded
	CutAfter                // forward the frame, then cut the connection
)

// Proxy forwards every connection accepted on Addr to the target address.
type Proxy struct {
	target string
	ln     net.Listener

	mu       sync.Mutex
	links    map[*link]struct{}
	accepted int
	cuts     int
	rule     func(Frame) Action
	latency  time.Duration
	rate     int           // bytes per second per direction of each connection; 0: unlimited
	healed   chan struct{} // closed while no black hole
	refuse   bool
	seen     map[Dir]map[string]int
	closed   bool
}

// New listens on a free loopback port and proxies to target ("host:port").
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listening: %w", err)
	}
	healed := make(chan struct{})
	close(healed)
	p := &Proxy{target: target, ln: ln, links: make(map[*link]struct{}), healed: healed,
		seen: map[Dir]map[string]int{ToServer: {}, ToClient: {}}}
	go p.accept()
	return p, nil
}

// Start is New for tests: it fails tb on error and closes the proxy at cleanup.
func Start(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := New(target)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return p
}

// Addr is the proxy's listening address, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port is the proxy's listening port.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Close stops accepting and cuts every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.CutAll()
}

// CutWhen installs rule: it sees every frame of every connection, in either
// direction, one at a time, until it returns CutBefore or CutAfter; then the
// connection that frame belongs to is cut (both sides closed) and the rule is
// removed. A new rule replaces the previous one.
func (p *Proxy) CutWhen(rule func(Frame) Action) {
	p.mu.Lock()
	p.rule = rule
	p.mu.Unlock()
}

// CutAll cuts every open connection.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		p.cut(l)
	}
}

// BlackHole stops all traffic in both directions of every connection, open or
// new, without closing anything: no FIN, no RST, bytes just stop arriving (a
// half-open connection, as after a cable pull or a crashed host). Heal ends it and
// delivers what was held.
func (p *Proxy) BlackHole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.healed:
		p.healed = make(chan struct{})
	default:
	}
}

// Heal ends a black hole.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.healed:
	default:
		close(p.healed)
	}
}

// Refuse makes the proxy close new connections at once (a broker that is down)
// while on is true.
func (p *Proxy) Refuse(on bool) {
	p.mu.Lock()
	p.refuse = on
	p.mu.Unlock()
}

// SetLatency delays every frame by d in each direction (so a round trip takes 2d
// more), keeping order.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// SetBandwidth limits each direction of each connection to bytesPerSecond
// (0: unlimited).
func (p *Proxy) SetBandwidth(bytesPerSecond int) {
	p.mu.Lock()
	p.rate = bytesPerSecond
	p.mu.Unlock()
}

// Accepted is the number of connections accepted so far (refused ones included).
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Open is the number of connections currently open.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Cuts is the number of connections cut by a rule.
func (p *Proxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// Seen is how many frames with command cmd went in direction d so far.
func (p *Proxy) Seen(d Dir, cmd string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[d][cmd]
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepted++
		n := p.accepted
		refuse := p.refuse || p.closed
		p.mu.Unlock()
		if refuse {
			reset(c)
			continue
		}
		go p.serve(c, n)
	}
}

// link is one proxied connection.
type link struct {
	n        int
	client   net.Conn
	server   net.Conn
	done     chan struct{}
	doneOnce sync.Once
	mu       sync.Mutex
	fins     int // directions closed gracefully
}

func (p *Proxy) serve(client net.Conn, n int) {
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		reset(client)
		return
	}
	l := &link{n: n, client: client, server: server, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		reset(client)
		reset(server)
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	go p.pump(l, ToServer, client, server)
	go p.pump(l, ToClient, server, client)
}

// cut closes both sides of l, as the kernel does for a process that dies: a FIN,
// or an RST where unread data remains.
func (p *Proxy) cut(l *link) {
	l.doneOnce.Do(func() {
		close(l.done)
		l.client.Close()
		l.server.Close()
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
	})
}

// reset closes c with an RST (SO_LINGER 0) instead of a FIN: an abrupt cut.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

type item struct {
	b   []byte
	due time.Time
	cut bool // cut the link after writing b
	fin bool // the source closed: pass the FIN on
}

// pump reads frames from src and hands them, with their delivery time, to a
// writer for dst; the channel between them is short, so a slow or held writer
// stops the reader and TCP pushes back on the sender, as on a real slow link.
func (p *Proxy) pump(l *link, d Dir, src, dst net.Conn) {
	q := make(chan item, 16)
	go p.write(l, dst, q)
	defer close(q)
	r := bufio.NewReaderSize(src, 64<<10)
	amqp := isAMQP(r)
	raw := !amqp && !maybeStomp(r)
	for {
		var f Frame
		var b []byte
		var err error
		switch {
		case raw:
			b, err = readRaw(r)
			f = Frame{Command: "RAW"}
		case amqp:
			f, b, err = readAMQPFrame(r)
			if errors.Is(err, errNotAMQP) {
				raw, err = true, nil
				f.Command = "RAW"
			}
		default:
			f, b, err = readFrame(r)
			if errors.Is(err, errNotStomp) {
				raw, err = true, nil
				f.Command = "RAW"
			}
		}
		if len(b) == 0 && err != nil {
			if err == io.EOF {
				// A FIN from one side: pass it on as a FIN, after what was queued.
				select {
				case q <- item{fin: true}:
				case <-l.done:
				}
				return
			}
			p.cut(l)
			return
		}
		f.Dir, f.Conn, f.Size = d, l.n, len(b)
		// A black hole holds the frame (and, by not reading, everything behind it).
		if !p.waitHealed(l) {
			return
		}
		p.mu.Lock()
		act := Pass
		if p.rule != nil {
			act = p.rule(f)
			if act != Pass {
				p.rule = nil
				p.cuts++
			}
		}
		p.seen[d][f.Command]++
		due := time.Now().Add(p.latency)
		p.mu.Unlock()
		if act == CutBefore {
			b = nil // what was queued before still goes out, then the cut
		}
		select {
		case q <- item{b: b, due: due, cut: act != Pass}:
		case <-l.done:
			return
		}
		if err != nil || act != Pass {
			if err != nil {
				p.cut(l)
			}
			return
		}
	}
}

func (p *Proxy) waitHealed(l *link) bool {
	p.mu.Lock()
	healed := p.healed
	p.mu.Unlock()
	select {
	case <-healed:
		return true
	case <-l.done:
		return false
	}
}

// write delivers items at their due time, paced by the bandwidth limit.
func (p *Proxy) write(l *link, dst net.Conn, q <-chan item) {
	var next time.Time // when the bandwidth limit allows the next byte
	for it := range q {
		if it.fin {
			if tc, ok := dst.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
			l.mu.Lock()
			l.fins++
			both := l.fins == 2
			l.mu.Unlock()
			if both {
				p.cut(l)
			}
			return
		}
		if !sleepUntil(it.due, l.done) {
			return
		}
		b := it.b
		for len(b) > 0 {
			if !p.waitHealed(l) {
				return
			}
			p.mu.Lock()
			rate := p.rate
			p.mu.Unlock()
			n := len(b)
			if rate > 0 {
				n = min(n, max(1, rate/100)) // 10 ms worth at a time
				if now := time.Now(); next.Before(now) {
					next = now
				}
				if !sleepUntil(next, l.done) {
					return
				}
				next = next.Add(time.Duration(n) * time.Second / time.Duration(rate))
			}
			if _, err := dst.Write(b[:n]); err != nil {
				p.cut(l)
				return
			}
			b = b[n:]
		}
		if it.cut {
			p.cut(l)
			return
		}
	}
}

func sleepUntil(t time.Time, done <-chan struct{}) bool {
	d := time.Until(t)
	if d <= 0 {
		select {
		case <-done:
			return false
		default:
			return true
		}
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-done:
		return false
	}
}

var errNotStomp = errors.New("not a stomp frame")

// maybeStomp reports whether the stream may be STOMP: it starts with a
// command's capital letter or an end of line. OpenWire (a binary length
// first) is not, and is passed on raw from its first byte: waiting for a line
// it never sends would hold it.
func maybeStomp(r *bufio.Reader) bool {
	b, err := r.Peek(1)
	return err != nil || b[0] >= 'A' && b[0] <= 'Z' || b[0] == '\n' || b[0] == '\r'
}

// maxLine bounds a command or header line; longer means the stream is not STOMP
// (or not one the sniffer needs to understand).
const maxLine = 64 << 10

// readFrame reads one STOMP frame (or heart-beat EOL) and returns it with its exact
// bytes. On errNotStomp the bytes read so far are returned, to be passed on raw.
func readFrame(r *bufio.Reader) (Frame, []byte, error) {
	var buf bytes.Buffer
	line, err := readLine(r, &buf)
	if err != nil {
		return Frame{}, buf.Bytes(), err
	}
	if len(line) == 0 {
		return Frame{}, buf.Bytes(), nil
	}
	if !isCommand(line) {
		return Frame{}, buf.Bytes(), errNotStomp
	}
	f := Frame{Command: string(line)}
	length := -1
	for {
		line, err := readLine(r, &buf)
		if err != nil {
			return f, buf.Bytes(), err
		}
		if len(line) == 0 {
			break
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return f, buf.Bytes(), errNotStomp
		}
		f.Header = append(f.Header, string(k), string(v))
		if string(k) == "content-length" && length < 0 {
			if n, err := strconv.Atoi(string(v)); err == nil && n >= 0 {
				length = n
			}
		}
	}
	if length >= 0 {
		if _, err := io.CopyN(&buf, r, int64(length)+1); err != nil {
			return f, buf.Bytes(), err
		}
		return f, buf.Bytes(), nil
	}
	for {
		chunk, err := r.ReadSlice(0)
		buf.Write(chunk)
		if err == nil {
			return f, buf.Bytes(), nil
		}
		if err != bufio.ErrBufferFull {
			return f, buf.Bytes(), err
		}
	}
}

func readLine(r *bufio.Reader, buf *bytes.Buffer) ([]byte, error) {
	start := buf.Len()
	for {
		chunk, err := r.ReadSlice('\n')
		buf.Write(chunk)
		if err == nil {
			break
		}
		if err != bufio.ErrBufferFull {
			return nil, err
		}
		if buf.Len()-start > maxLine {
			return nil, errNotStomp
		}
	}
	line := buf.Bytes()[start : buf.Len()-1]
	return bytes.TrimSuffix(line, []byte("\r")), nil
}

func isCommand(b []byte) bool {
	if len(b) > 32 {
		return false
	}
	for _, c := range b {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

// readRaw returns whatever bytes are available (at least one).
func readRaw(r *bufio.Reader) ([]byte, error) {
	if _, err := r.Peek(1); err != nil {
		return nil, err
	}
	b := make([]byte, r.Buffered())
	n, err := r.Read(b)
	return b[:n], err
}
