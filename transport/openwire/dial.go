package openwire

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/internal/quickack"
	"github.com/brokernet/brokernet/transport"
)

// Dial implements transport.Endpoint: it connects to the broker at u,
// logging to the zerolog logger of ctx (zerolog.Ctx). opts.ClientID is used
// when the URI sets no clientId.
func (u URI) Dial(ctx context.Context, opts transport.DialOptions) (transport.Conn, error) {
	if opts.ClientID != "" && u.ClientID == "" {
		u.ClientID = opts.ClientID
	}
	c, err := Dial(ctx, u, *zerolog.Ctx(ctx))
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Backoff implements transport.Endpoint: the reconnect policy of u.
func (u URI) Backoff() transport.Reconnect { return u.Reconnect }

// Version is the OpenWire version brokernet speaks. ActiveMQ 5.17 offers 12;
// a newer broker negotiates down to it (the minimum of both sides).
const Version = 12

// Dial connects, negotiates the wire format and opens the connection, a
// session and an anonymous producer.
func Dial(ctx context.Context, uri URI, log zerolog.Logger) (*Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", uri.Addr())
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", uri, err)
	}
	// ActiveMQ's OpenWire connector writes with Nagle's algorithm on by
	// default, like its STOMP one (see quickack).
	nc = quickack.Wrap(nc)
	if uri.TLS {
		if nc, err = uri.TLSOptions().Client(ctx, nc, uri.Host, uri); err != nil {
			return nil, err
		}
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	c := &Conn{
		uri:     uri,
		log:     log.With().Str("component", "openwire").Str("broker", uri.String()).Logger(),
		nc:      nc,
		connID:  &connectionID{Value: "ID:brokernet-" + hex.EncodeToString(rnd[:]) + "-1"},
		out:     make(chan outFrame, 1024),
		done:    make(chan struct{}),
		subInfo: make(chan *brokerSubscriptionInfo, 1),
		events:  newQueue(),
		waiters: make(map[int32]func(command)),
		subs:    make(map[string]*subscription),
		byValue: make(map[int64]*subscription),
		advisor: make(map[int64]bool),
		temps:   make(map[string]*tempOwner),
		names:   names{},
	}
	c.sessID = &sessionID{ConnectionID: c.connID.Value, Value: 1}
	c.prodID = &producerID{ConnectionID: c.connID.Value, SessionID: 1, Value: 1}
	c.clientID = uri.ClientID
	if c.clientID == "" {
		c.clientID = c.connID.Value
	}
	br := bufio.NewReaderSize(nc, 64<<10)
	if err := c.handshake(ctx, br); err != nil {
		nc.Close()
		return nil, err
	}
	c.info = transport.Info{
		Protocol:     "openwire",
		Server:       c.info.Server,
		Flavour:      transport.ActiveMQ,
		ConnectionID: c.connID.Value,
		Selectors:    true,
		Transactions: true,
		KeepsID:      KeepsID,
	}
	go c.readLoop(br)
	go c.writeLoop()
	go c.events.pump(c.done)
	if c.inactivity > 0 {
		go c.keepAlive()
	}
	return c, nil
}

// ourWireFormat is brokernet's preferred wire format (the keys of
// WireFormatInfo's property map, WireFormatInfo.java).
func (c *Conn) ourWireFormat() *wireFormatInfo {
	b, _ := encodeProps([]transport.Property{
		{Name: "TightEncodingEnabled", Value: c.uri.Tight},
		{Name: "CacheEnabled", Value: false},
		{Name: "SizePrefixDisabled", Value: false},
		{Name: "StackTraceEnabled", Value: false},
		{Name: "TcpNoDelayEnabled", Value: true},
		{Name: "CacheSize", Value: int32(0)},
		{Name: "MaxInactivityDuration", Value: c.uri.MaxInactivity.Milliseconds()},
		{Name: "MaxInactivityDurationInitalDelay", Value: initialDelay(c.uri.MaxInactivity).Milliseconds()},
		{Name: "MaxFrameSize", Value: int64(c.uri.MaxFrameSize)},
		{Name: "ProviderName", Value: "brokernet"},
	})
	return &wireFormatInfo{Magic: magic, Version: Version, Props: b}
}

func (c *Conn) handshake(ctx context.Context, br *bufio.Reader) error {
	deadline, _ := ctx.Deadline()
	c.nc.SetDeadline(deadline)
	defer c.nc.SetDeadline(time.Time{})
	fail := func(err error) error { return fmt.Errorf("connecting to %s: %w", c.uri, err) }

	if _, err := c.nc.Write(encodeFrame(c.ourWireFormat())); err != nil {
		return fail(err)
	}
	ci := &connectionInfo{
		ConnectionID: c.connID,
		ClientID:     c.clientID,
		UserName:     c.uri.User,
		Password:     c.uri.Password,
	}
	ci.CommandID = c.cmdID.Add(1)
	ci.ResponseRequired = true
	var buf []byte
	gotWF, gotBroker, connected := false, false, false
	for !(gotWF && gotBroker && connected) {
		p, err := readFrame(br, buf, c.uri.MaxFrameSize)
		if err != nil {
			return fail(err)
		}
		buf = p
		cmd, err := decodeCommandAs(p, c.traces, c.tight && gotWF, nil)
		if err != nil {
			var unknown errUnknownCommand
			if errors.As(err, &unknown) {
				continue
			}
			return fail(err)
		}
		switch x := cmd.(type) {
		case *wireFormatInfo:
			if x.Magic != magic {
				return fail(fmt.Errorf("not an OpenWire broker (magic %q)", x.Magic[:]))
			}
			if err := c.negotiate(x); err != nil {
				return fail(err)
			}
			gotWF = true
			w := &writer{}
			for _, f := range []dataStructure{ci,
				&sessionInfo{baseCommand: baseCommand{CommandID: c.cmdID.Add(1)}, SessionID: c.sessID},
				&producerInfo{baseCommand: baseCommand{CommandID: c.cmdID.Add(1)}, ProducerID: c.prodID},
			} {
				w.b = append(w.b, encodeFrameAs(f, c.tight)...)
			}
			if _, err := c.nc.Write(w.b); err != nil {
				return fail(err)
			}
		case *brokerInfo:
			if x.BrokerID != nil {
				c.brokerID = x.BrokerID.Value
			}
			c.brokerName = x.BrokerName
			gotBroker = true
		case *exceptionResponse:
			return fail(&BrokerError{Exception: x.Exception})
		case *response:
			if x.CorrelationID == ci.CommandID {
				connected = true
			}
		case *connectionError:
			return fail(&BrokerError{Exception: x.Exception})
		}
	}
	return nil
}

// negotiate applies the broker's WireFormatInfo: the AND of the boolean
// options, the minimum of version and inactivity duration.
func (c *Conn) negotiate(x *wireFormatInfo) error {
	if x.Version < Version {
		return fmt.Errorf("broker speaks OpenWire version %d; brokernet needs %d (ActiveMQ 5.13 or later)", x.Version, Version)
	}
	props, err := decodeProps(x.Props, nil)
	if err != nil {
		return fmt.Errorf("broker WireFormatInfo: %w", err)
	}
	c.inactivity = c.uri.MaxInactivity
	name, version := "ActiveMQ", ""
	for _, p := range props {
		switch p.Name {
		case "TightEncodingEnabled":
			v, _ := p.Value.(bool)
			c.tight = c.uri.Tight && v
		case "StackTraceEnabled":
			// brokernet offers false, so the AND is false whatever the broker says.
		case "MaxInactivityDuration":
			if v, ok := p.Value.(int64); ok {
				if d := time.Duration(v) * time.Millisecond; d < c.inactivity {
					c.inactivity = d
				}
			}
		case "ProviderName":
			if s, ok := p.Value.(string); ok && s != "" {
				name = s
			}
		case "ProviderVersion":
			version, _ = p.Value.(string)
		}
	}
	c.info.Server = strings.TrimSpace(name + " " + version)
	return nil
}

// keepAlive writes a KeepAliveInfo when nothing was written for a third of
// the negotiated inactivity duration, so the broker's InactivityMonitor
// keeps the connection.
func (c *Conn) keepAlive() {
	t := time.NewTicker(c.inactivity / 3)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
			if !c.wrote.Swap(false) {
				c.write(context.Background(), &keepAliveInfo{}, nil)
			}
		}
	}
}

// initialDelay is MaxInactivityDurationInitalDelay (sic): how long the
// broker's InactivityMonitor waits before its first check. Its checks then
// write a KeepAliveInfo every third of the duration when idle
// (AbstractInactivityMonitor).
func initialDelay(inactivity time.Duration) time.Duration {
	return min(10*time.Second, inactivity)
}
