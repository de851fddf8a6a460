package stomp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-stomp/stomp/v3/frame"
)

// ErrFrameTooLarge is returned by the reader when a frame's header section or body
// exceeds the configured limit. go-stomp's own frame.Reader has no limit and allocates
// whatever content-length a peer announces, so brokernet reads frames itself.
var ErrFrameTooLarge = errors.New("stomp frame exceeds size limit")

// errHeartBeat is what the reader returns for a bare end-of-line between frames.
var errHeartBeat = errors.New("heart-beat")

// encoder writes STOMP 1.1/1.2 frames into a buffered writer. It never flushes:
// the connection's writer goroutine flushes once its queue is empty, so a burst of
// frames costs one write system call instead of one per frame.
type encoder struct {
	w *bufio.Writer
	// escape is false only for the CONNECT frame, whose headers are never escaped.
	escape bool
}

var headerEscaper = strings.NewReplacer("\\", "\\\\", "\r", "\\r", "\n", "\\n", ":", "\\c")

// needsEscape reports whether s holds a character STOMP 1.2 escapes in headers.
// Most headers hold none, and checking is far cheaper than the replacer.
func needsEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\', '\r', '\n', ':':
			return true
		}
	}
	return false
}

func (e *encoder) writeFrame(f *frame.Frame) error {
	if _, err := e.w.WriteString(f.Command); err != nil {
		return err
	}
	e.w.WriteByte('\n')
	escape := e.escape && f.Command != frame.CONNECT && f.Command != frame.STOMP
	if f.Header != nil {
		for i := 0; i < f.Header.Len(); i++ {
			k, v := f.Header.GetAt(i)
			if escape && (needsEscape(k) || needsEscape(v)) {
				headerEscaper.WriteString(e.w, k)
				e.w.WriteByte(':')
				headerEscaper.WriteString(e.w, v)
			} else {
				e.w.WriteString(k)
				e.w.WriteByte(':')
				e.w.WriteString(v)
			}
			e.w.WriteByte('\n')
		}
	}
	e.w.WriteByte('\n')
	e.w.Write(f.Body)
	return e.w.WriteByte(0)
}

// decoder reads STOMP frames with a bound on their size.
type decoder struct {
	r        *bufio.Reader
	maxFrame int
	// maxHeaders and maxHeaderBytes bound the header section (0: maxFrame bytes,
	// no count limit). A header costs ~40 bytes beyond its text (two string
	// headers and its share of the slice), so the count bounds the expansion.
	maxHeaders, maxHeaderBytes int
	// unescape is set once CONNECTED negotiated version 1.1 or later.
	unescape bool

	// Scratch space of readFrame, reused from frame to frame.
	block []byte   // the header lines
	cuts  []int    // per header: start, colon, end in block
	kv    []string // keys and values
}

// readFrame returns the next frame, or errHeartBeat for a heart-beat EOL.
func (d *decoder) readFrame() (*frame.Frame, error) {
	line, err := d.readLine(d.maxFrame)
	if err != nil {
		return nil, err
	}
	if len(line) == 0 {
		return nil, errHeartBeat
	}
	f := &frame.Frame{}
	// A switch on string(line) does not allocate; the constants are reused.
	switch string(line) {
	case frame.CONNECTED:
		f.Command = frame.CONNECTED
	case frame.MESSAGE:
		f.Command = frame.MESSAGE
	case frame.RECEIPT:
		f.Command = frame.RECEIPT
	case frame.ERROR:
		f.Command = frame.ERROR
	default:
		return nil, fmt.Errorf("unexpected stomp command %q", trimForLog(line))
	}
	headerBytes, headers := 0, 0
	maxHeaderBytes := d.maxFrame
	if d.maxHeaderBytes > 0 && d.maxHeaderBytes < maxHeaderBytes {
		maxHeaderBytes = d.maxHeaderBytes
	}
	// The header lines are gathered in d.block and turned into one string,
	// which every key and value is a slice of: one allocation for the
	// header text instead of two per header (a MESSAGE carries a dozen or
	// more), and one for the header list, sized exactly.
	d.block, d.cuts = d.block[:0], d.cuts[:0]
	for {
		line, err := d.readLine(maxHeaderBytes - headerBytes + 2)
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			break
		}
		headerBytes += len(line)
		if headerBytes > maxHeaderBytes {
			return nil, fmt.Errorf("%w: header section above %d bytes", ErrFrameTooLarge, maxHeaderBytes)
		}
		if headers++; d.maxHeaders > 0 && headers > d.maxHeaders {
			return nil, fmt.Errorf("%w: more than %d headers", ErrFrameTooLarge, d.maxHeaders)
		}
		i := bytes.IndexByte(line, ':')
		if i <= 0 {
			return nil, fmt.Errorf("malformed stomp header line %q", trimForLog(line))
		}
		start := len(d.block)
		d.block = append(d.block, line...)
		d.cuts = append(d.cuts, start, start+i, len(d.block))
	}
	text := string(d.block)
	d.kv = d.kv[:0]
	for j := 0; j < len(d.cuts); j += 3 {
		k, v := text[d.cuts[j]:d.cuts[j+1]], text[d.cuts[j+1]+1:d.cuts[j+2]]
		if d.unescape && f.Command != frame.CONNECTED {
			var err error
			if k, err = unescapeHeader(k); err != nil {
				return nil, err
			}
			if v, err = unescapeHeader(v); err != nil {
				return nil, err
			}
		}
		d.kv = append(d.kv, k, v)
	}
	f.Header = frame.NewHeader(d.kv...) // copies d.kv once, exactly sized
	clear(d.kv)                         // keep no references to the text
	if cap(d.block) > 64<<10 {
		// A rare huge header section does not stay allocated.
		d.block, d.cuts, d.kv = nil, nil, nil
	}
	if cl, ok := f.Header.Contains(frame.ContentLength); ok {
		// Digits only, as go-stomp's reader has it (Atoi would take "+5" and "-0").
		n64, err := strconv.ParseUint(cl, 10, 31)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return nil, ErrFrameTooLarge
			}
			return nil, fmt.Errorf("malformed content-length %q", cl)
		}
		n := int(n64)
		if n > d.maxFrame {
			return nil, ErrFrameTooLarge
		}
		f.Body = make([]byte, n+1)
		if _, err := ioReadFull(d.r, f.Body); err != nil {
			return nil, err
		}
		if f.Body[n] != 0 {
			return nil, errors.New("stomp frame body not terminated by NUL")
		}
		f.Body = f.Body[:n]
		return f, nil
	}
	var body []byte
	for {
		chunk, err := d.r.ReadSlice(0)
		if len(body)+len(chunk) > d.maxFrame {
			return nil, ErrFrameTooLarge
		}
		body = append(body, chunk...)
		if err == nil {
			break
		}
		if err != bufio.ErrBufferFull {
			return nil, err
		}
	}
	f.Body = body[:len(body)-1]
	return f, nil
}

// readLine reads one line without its EOL (LF or CRLF), bounded by limit bytes.
func (d *decoder) readLine(limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := d.r.ReadSlice('\n')
		if err == nil && line == nil {
			// Fast path: the whole line is in the buffer. Copy only what we keep.
			line = chunk
			break
		}
		if len(line)+len(chunk) > limit {
			return nil, ErrFrameTooLarge
		}
		line = append(line, chunk...)
		if err == nil {
			break
		}
		if err != bufio.ErrBufferFull {
			return nil, err
		}
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

func unescapeHeader(s string) (string, error) {
	if strings.IndexByte(s, '\\') < 0 {
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i == len(s) {
			return "", fmt.Errorf("malformed stomp header escape in %q", s)
		}
		switch s[i] {
		case 'r':
			b.WriteByte('\r')
		case 'n':
			b.WriteByte('\n')
		case 'c':
			b.WriteByte(':')
		case '\\':
			b.WriteByte('\\')
		default:
			return "", fmt.Errorf("malformed stomp header escape in %q", s)
		}
	}
	return b.String(), nil
}

func ioReadFull(r *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// trimForLog shortens peer-supplied bytes for error messages.
func trimForLog(b []byte) string {
	const max = 64
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
