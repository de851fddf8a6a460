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

func (e *encoder) writeFrame(f *frame.Frame) error {
	if _, err := e.w.WriteString(f.Command); err != nil {
		return err
	}
	e.w.WriteByte('\n')
	escape := e.escape && f.Command != frame.CONNECT && f.Command != frame.STOMP
	if f.Header != nil {
		for i := 0; i < f.Header.Len(); i++ {
			k, v := f.Header.GetAt(i)
			if escape {
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
	f := &frame.Frame{Command: string(line), Header: frame.NewHeader()}
	switch f.Command {
	case frame.CONNECTED, frame.MESSAGE, frame.RECEIPT, frame.ERROR:
	default:
		return nil, fmt.Errorf("unexpected stomp command %q", trimForLog(line))
	}
	headerBytes, headers := 0, 0
	maxHeaderBytes := d.maxFrame
	if d.maxHeaderBytes > 0 && d.maxHeaderBytes < maxHeaderBytes {
		maxHeaderBytes = d.maxHeaderBytes
	}
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
		k, v := string(line[:i]), string(line[i+1:])
		if d.unescape && f.Command != frame.CONNECTED {
			if k, err = unescapeHeader(k); err != nil {
				return nil, err
			}
			if v, err = unescapeHeader(v); err != nil {
				return nil, err
			}
		}
		f.Header.Add(k, v)
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
