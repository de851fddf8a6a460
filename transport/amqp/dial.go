package amqp

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/brokernet/brokernet/internal/quickack"
	"github.com/brokernet/brokernet/transport"
)

// DialConn connects to u, opens a session and learns who the broker is.
func DialConn(ctx context.Context, u URI) (*Conn, error) {
	opts := &amqp.ConnOptions{
		ContainerID:  u.ContainerID,
		IdleTimeout:  u.IdleTimeout,
		MaxFrameSize: 1 << 20,
		Properties:   map[string]any{"product": "brokernet"},
	}
	if opts.ContainerID == "" {
		opts.ContainerID = "brokernet-" + randomHex(6)
	}
	if u.IdleTimeout == 0 {
		opts.IdleTimeout = -1 // go-amqp: <0 disables; 0 would mean its 1 min default
	}
	if u.VHost != "" {
		// RabbitMQ picks the vhost from the open frame's hostname "vhost:NAME".
		opts.HostName = "vhost:" + u.VHost
	}
	if u.User != "" {
		opts.SASLType = amqp.SASLTypePlain(u.User, u.Password)
	} else {
		opts.SASLType = amqp.SASLTypeAnonymous()
	}
	if opts.HostName == "" {
		opts.HostName = u.Host
	}
	// brokernet dials the socket itself to know its local address: RabbitMQ
	// names a connection "CLIENT:PORT -> SERVER:PORT", and the management API
	// shows that name on every consumer of the connection.
	nd := &net.Dialer{KeepAlive: 30 * time.Second}
	nc, err := nd.DialContext(ctx, "tcp", u.Addr())
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", u, err)
	}
	// A broker writing with Nagle's algorithm on would otherwise wait for
	// our delayed ACKs (see quickack); RabbitMQ's default is nodelay, others'
	// may not be.
	nc = quickack.Wrap(nc)
	if u.TLS {
		cfg, terr := u.tlsConfig()
		if terr != nil {
			nc.Close()
			return nil, fmt.Errorf("dialing %s: %w", u, terr)
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			tc.Close()
			return nil, fmt.Errorf("dialing %s: %w", u, err)
		}
		nc = tc
	}
	connName := nc.LocalAddr().String() + " -> " + nc.RemoteAddr().String()
	// Credentials go through SASLType, never in an address, so no error of
	// go-amqp can repeat them. NewConn owns nc from here on.
	ac, err := amqp.NewConn(ctx, nc, opts)
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", u, err)
	}
	sendSess, err := ac.NewSession(ctx, nil)
	if err != nil {
		ac.Close()
		return nil, fmt.Errorf("opening sessions on %s: %w", u, err)
	}
	c := &Conn{
		uri:      u,
		conn:     ac,
		sendSess: sendSess,
		q:        newEventQueue(),
		events:   make(chan transport.Event),
		done:     make(chan struct{}),
		subs:     map[string]*subscription{},
		syncSig:  make(chan struct{}, 1),
		senders:  map[string]*amqp.Sender{},
	}
	c.life, c.cancel = context.WithCancel(context.Background())
	c.info, c.clusterName = describe(ac.Properties(), u.Flavour)
	c.info.ConnectionID = connName
	if c.info.Flavour == transport.RabbitMQ {
		c.topics, c.topicsErr = newTopicQueue(u)
		if c.topicsErr == nil {
			go c.sweepTopicQueues()
		}
	}
	go c.q.run(c.events, c.done)
	go c.watch()
	go c.syncLoop()
	return c, nil
}

// describe reads the open frame's properties; RabbitMQ 3.10 sends product
// "RabbitMQ", version and cluster_name (verified-here.md).
func describe(props map[string]any, forced transport.Flavour) (transport.Info, string) {
	str := func(k string) string { s, _ := props[k].(string); return s }
	info := transport.Info{Protocol: "amqp", Flavour: forced, KeepsID: keepsAny}
	product, version := str("product"), str("version")
	info.Server = product
	if version != "" {
		info.Server += "/" + version
	}
	if info.Flavour == transport.UnknownFlavour {
		switch product {
		case "RabbitMQ":
			info.Flavour = transport.RabbitMQ
		case "apache-activemq-artemis":
			info.Flavour = transport.Artemis
		case "ActiveMQ":
			info.Flavour = transport.ActiveMQ
		}
	}
	return info, str("cluster_name")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// keepsAny is Info.KeepsID: properties message-id takes any id.
func keepsAny(string) bool { return true }
