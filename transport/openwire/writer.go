package openwire

import (
	"bufio"
	"context"
	"fmt"
	"time"

	"github.com/brokernet/brokernet/internal/mailbox"
	"github.com/brokernet/brokernet/transport"
)

// write queues cmd. If onResponse is not nil the command asks for a
// response, and onResponse runs on the reader goroutine when it arrives
// (with nil if the connection ends first).
func (c *Conn) write(ctx context.Context, cmd command, onResponse func(command)) error {
	b := cmd.base()
	b.CommandID = c.cmdID.Add(1)
	b.ResponseRequired = onResponse != nil
	if onResponse != nil {
		c.mu.Lock()
		if c.waiters == nil {
			c.mu.Unlock()
			return c.closedErr()
		}
		c.waiters[b.CommandID] = onResponse
		c.mu.Unlock()
	}
	select {
	case <-c.done:
		// Not queued on an ended connection, where the select below could
		// pick the buffered c.out and report it written.
		c.forget(b.CommandID)
		return c.closedErr()
	default:
	}
	frame := encodeFrameAs(cmd, c.tight)
	if len(frame)-4 > c.uri.MaxFrameSize {
		c.forget(b.CommandID)
		return fmt.Errorf("command of %d bytes exceeds wireFormat.maxFrameSize %d", len(frame)-4, c.uri.MaxFrameSize)
	}
	select {
	case c.out <- outFrame{b: frame}:
		return nil
	case <-c.done:
		return c.closedErr()
	case <-ctx.Done():
		c.forget(b.CommandID)
		return ctx.Err()
	}
}

func (c *Conn) forget(id int32) {
	c.mu.Lock()
	if c.waiters != nil {
		delete(c.waiters, id)
	}
	c.mu.Unlock()
}

// ping writes an empty ConnectionControl asking for a response; onResponse
// runs on the reader goroutine when the Response arrives, after the broker
// handled every command written before (it handles a connection's commands
// in order). The command touches no store, where an empty transaction would
// have a persistent ActiveMQ fsync its journal for the ROLLBACK.
//
// It was a KeepAliveInfo asking for a response, which ActiveMQ's
// InactivityMonitor sends back itself (AbstractInactivityMonitor.onCommand).
// But 5.17 writes that echo from the connection's reader thread under the
// monitor's shared send lock only, below the MutexTransport that orders the
// connection's other writes, and its TCP output buffer is not safe for two
// writers: an echo while the broker dispatched messages to the connection
// lost or doubled bytes of the stream. TestConfirmationsWhileTheBrokerDispatches
// (non-persistent confirmations while a stream of messages is dispatched)
// broke the connection in 3 runs of 3 within seconds: frame sizes read from
// the middle of a frame, and once a dispatch seen twice (the broker refused
// the cumulative ack: "Expected message count (100) differs from count in
// dispatched-list (99)"). A ConnectionControl is answered by the
// TransportConnection with a Response, written through the MutexTransport.
func (c *Conn) ping(ctx context.Context, onResponse func(command)) error {
	return c.write(ctx, &connectionControl{}, onResponse)
}

// respErr returns the error a response carries, nil for success.
func respErr(r command) error {
	switch x := r.(type) {
	case nil:
		return transport.ErrClosed
	case *exceptionResponse:
		return &BrokerError{Exception: x.Exception}
	}
	return nil
}

// confirm returns a response handler that puts Confirmed or Refused for tok
// on the event stream.
func (c *Conn) confirm(tok transport.Token, then func(error)) func(command) {
	return func(r command) {
		err := respErr(r)
		if then != nil {
			then(err)
		}
		if r == nil {
			return // the connection ended; Events closes
		}
		if err != nil {
			c.events.push(transport.Event{Kind: transport.Refused, Token: tok, Err: err})
		} else {
			c.events.push(transport.Event{Kind: transport.Confirmed, Token: tok})
		}
	}
}

// outFrame is a frame for the writer, or (flushed set) a barrier closed
// once everything queued before it is on the socket.
type outFrame struct {
	b       []byte
	flushed chan struct{}
}

// urgentQueue holds the frames the reader goroutine writes (acks of
// advisories and undecodable messages, KeepAliveInfo replies). It is
// unbounded so that the reader never waits for the writer: if it did, a
// broker blocked writing to us stops reading from us (see Sync), our write
// queue would fill, our reader would stop draining the socket, and both
// sides would wait on each other. The frames are few (the broker's prefetch bounds the
// deliveries that cause them).
type urgentQueue struct {
	mailbox.Mailbox[[]byte]
}

func (q *urgentQueue) push(b []byte) { q.Push(b) }

func (q *urgentQueue) take() [][]byte { return q.Take() }

func (q *urgentQueue) empty() bool { return q.Len() == 0 }

// writeFromReader queues cmd (which asks for no response) for the writer
// without ever blocking: it is the reader goroutine's way to write.
func (c *Conn) writeFromReader(cmd command) {
	b := cmd.base()
	b.CommandID = c.cmdID.Add(1)
	b.ResponseRequired = false
	c.urgent.push(encodeFrameAs(cmd, c.tight))
}

// writeFromReaderAwaiting is writeFromReader for a command that asks for a
// response, handled by onResponse.
func (c *Conn) writeFromReaderAwaiting(cmd command, onResponse func(command)) {
	b := cmd.base()
	b.CommandID = c.cmdID.Add(1)
	b.ResponseRequired = true
	c.mu.Lock()
	if c.waiters == nil {
		c.mu.Unlock()
		return // the connection ended; Events closes
	}
	c.waiters[b.CommandID] = onResponse
	c.mu.Unlock()
	c.urgent.push(encodeFrameAs(cmd, c.tight))
}

// writeLoop writes queued frames, the reader's first, flushing when both
// queues are empty.
func (c *Conn) writeLoop() {
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	write := func(b []byte) bool {
		c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := bw.Write(b); err != nil {
			c.fail(fmt.Errorf("writing to %s: %w", c.uri, err))
			return false
		}
		releaseFrame(b)
		return true
	}
	for {
		var f outFrame
		select {
		case f = <-c.out:
		case <-c.urgent.Signal():
		case <-c.done:
			return
		}
		for _, b := range c.urgent.take() {
			if !write(b) {
				return
			}
		}
		if f.b != nil && !write(f.b) {
			return
		}
		if (len(c.out) == 0 && c.urgent.empty()) || f.flushed != nil {
			c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
			if err := bw.Flush(); err != nil {
				c.fail(fmt.Errorf("writing to %s: %w", c.uri, err))
				return
			}
		}
		if f.flushed != nil {
			close(f.flushed)
		}
		c.wrote.Store(true)
	}
}
