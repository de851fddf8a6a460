// Package mgmt is a minimal client for RabbitMQ's management HTTP API:
// the broker's identity (/api/overview), the consumer and binding snapshots
// that complement the event exchange (/api/consumers, /api/bindings) and the
// nodes' resource alarms (/api/nodes).
package mgmt

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultPort is the management plugin's default HTTP port.
const DefaultPort = 15672

// ErrSetup marks errors that only the broker's operator can fix (a plugin or
// a setting); retrying does not help. Test with errors.Is.
var ErrSetup = errors.New("RabbitMQ setup")

// ErrUnreachable marks a management API that refused the connection: the
// plugin is not enabled, the URL is wrong, or the node is (re)starting.
var ErrUnreachable = errors.New("RabbitMQ management API not reachable")

// Client talks to one node's management API. It is safe for concurrent use.
type Client struct {
	base       *url.URL // no user info: errors show it
	user, pass string
	http       *http.Client
}

// New returns a client for base ("http://host:15672" or "https://..."), with
// the credentials of the broker connection. user info in base, if any, wins
// over user and pass. hc may be nil (a client with a 10 s timeout).
func New(base, user, pass string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("RabbitMQ management URL %q: want http://HOST:PORT or https://HOST:PORT", redactURL(base))
	}
	if u.User != nil {
		user = u.User.Username()
		pass, _ = u.User.Password()
		u.User = nil
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	return &Client{base: u, user: user, pass: pass, http: hc}, nil
}

// DefaultURL is the management URL assumed for a broker at host:
// http://HOST:15672.
func DefaultURL(host string) string {
	return "http://" + net.JoinHostPort(host, strconv.Itoa(DefaultPort))
}

// URL is the base URL, without credentials.
func (c *Client) URL() string { return c.base.String() }

// redactURL drops the password of a URL-ish string for error messages.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		u.User = url.User(u.User.Username())
		return u.String()
	}
	if i := strings.LastIndex(s, "@"); i >= 0 {
		return "…@" + s[i+1:]
	}
	return s
}

// Overview is the part of GET /api/overview brokernet uses.
type Overview struct {
	ClusterName     string `json:"cluster_name"`
	Node            string `json:"node"`
	RabbitMQVersion string `json:"rabbitmq_version"`
	// DisableStats is true when management.disable_stats is set: then
	// /api/consumers answers 400.
	DisableStats bool `json:"disable_stats"`
}

// Consumer is one item of GET /api/consumers/{vhost}.
type Consumer struct {
	Queue struct {
		Name  string `json:"name"`
		VHost string `json:"vhost"`
	} `json:"queue"`
	ConsumerTag    string `json:"consumer_tag"`
	PrefetchCount  int    `json:"prefetch_count"`
	Exclusive      bool   `json:"exclusive"`
	ChannelDetails struct {
		Name           string `json:"name"`
		ConnectionName string `json:"connection_name"`
	} `json:"channel_details"`
}

// Binding is one item of GET /api/bindings/{vhost}.
type Binding struct {
	Source          string `json:"source"`
	VHost           string `json:"vhost"`
	Destination     string `json:"destination"`
	DestinationType string `json:"destination_type"`
	RoutingKey      string `json:"routing_key"`
}

// Overview reads GET /api/overview.
func (c *Client) Overview(ctx context.Context) (Overview, error) {
	var o Overview
	err := c.get(ctx, "/api/overview", &o)
	return o, err
}

// BrokerID returns the broker's identity for brokernet: the cluster name
// (one name for all nodes of a cluster, "rabbit@host" unless renamed), or the
// node name when the cluster name is empty.
func (c *Client) BrokerID(ctx context.Context) (string, error) {
	o, err := c.Overview(ctx)
	if err != nil {
		return "", err
	}
	return o.BrokerID()
}

// BrokerID is the cluster name, or the node name when that is empty.
func (o Overview) BrokerID() (string, error) {
	if id := strings.TrimSpace(o.ClusterName); id != "" {
		return id, nil
	}
	if id := strings.TrimSpace(o.Node); id != "" {
		return id, nil
	}
	return "", errors.New("RabbitMQ management /api/overview names neither cluster_name nor node")
}

// Consumers reads GET /api/consumers/{vhost}. Management statistics switched
// off give an ErrSetup error naming the settings.
func (c *Client) Consumers(ctx context.Context, vhost string) ([]Consumer, error) {
	var cs []Consumer
	err := c.get(ctx, "/api/consumers/"+url.PathEscape(vhost), &cs)
	return cs, err
}

// Bindings reads GET /api/bindings/{vhost}. Bindings are read from the
// broker's own tables, not from the (delayed) statistics.
func (c *Client) Bindings(ctx context.Context, vhost string) ([]Binding, error) {
	var bs []Binding
	err := c.get(ctx, "/api/bindings/"+url.PathEscape(vhost), &bs)
	return bs, err
}

// alarmsAnswer is GET /api/health/checks/alarms's answer.
type alarmsAnswer struct {
	Status string `json:"status"`
	Reason string `json:"reason"`
	Alarms []struct {
		Node     string `json:"node"`
		Resource string `json:"resource"`
	} `json:"alarms"`
}

// Alarms lists the resource alarms in force in the cluster, one line per
// alarm ("memory alarm on rabbit@host"); none: empty. While one is in force
// RabbitMQ blocks every connection that publishes, on every node. It reads
// GET /api/health/checks/alarms, which asks the nodes now (the statistics
// of /api/nodes lag by up to their collection interval).
func (c *Client) Alarms(ctx context.Context) ([]string, error) {
	const path = "/api/health/checks/alarms"
	status, out, err := c.do(ctx, http.MethodGet, path, "", nil)
	if err != nil {
		return nil, err
	}
	where := "GET " + c.base.String() + path
	switch status {
	case http.StatusOK, http.StatusServiceUnavailable: // 503: alarms in force
	case http.StatusUnauthorized:
		return nil, fmt.Errorf("%w: RabbitMQ management at %s refused the credentials of user %q (401)", ErrSetup, c.base, c.user)
	default:
		return nil, fmt.Errorf("RabbitMQ management %s: HTTP %d: %s", where, status, snippet(out))
	}
	var a alarmsAnswer
	if err := json.Unmarshal(out, &a); err != nil {
		return nil, fmt.Errorf("RabbitMQ management %s: malformed JSON: %w", where, err)
	}
	if status == http.StatusOK {
		return nil, nil
	}
	var list []string
	for _, x := range a.Alarms {
		list = append(list, x.Resource+" alarm on "+x.Node)
	}
	if len(list) == 0 {
		list = append(list, "alarm: "+cmp.Or(a.Reason, "(no reason given)"))
	}
	return list, nil
}

// QueueExists reports whether the queue exists (GET /api/queues/{vhost}/{name}
// answers 200; 404 means it does not). An AMQP 1.0 transfer to a missing
// queue's /amq/queue/ address is accepted and dropped by RabbitMQ 3.10.
func (c *Client) QueueExists(ctx context.Context, vhost, name string) (bool, error) {
	var q struct {
		Name string `json:"name"`
	}
	err := c.get(ctx, "/api/queues/"+url.PathEscape(vhost)+"/"+url.PathEscape(name), &q)
	var nf *notFoundError
	if errors.As(err, &nf) {
		return false, nil
	}
	return err == nil, err
}

// notFoundError is a 404 for anything but /api/overview.
type notFoundError struct{ where string }

func (e *notFoundError) Error() string {
	return "RabbitMQ management " + e.where + ": 404 not found"
}

// maxBody bounds a response: a snapshot of 100,000 consumers is ~60 MB.
const maxBody = 256 << 20

func (c *Client) get(ctx context.Context, path string, v any) error {
	u := *c.base
	u.RawPath = u.Path + path
	u.Path, _ = url.PathUnescape(u.RawPath)
	where := c.base.String() + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("RabbitMQ management %s: %w", where, err)
	}
	req.SetBasicAuth(c.user, c.pass)
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return fmt.Errorf("%w at %s (is the rabbitmq_management plugin enabled? set ?management= to its URL): %v",
				ErrUnreachable, c.base, err)
		}
		return fmt.Errorf("RabbitMQ management %s: %w", where, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("RabbitMQ management %s: reading the answer: %w", where, err)
	}
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusBadRequest && strings.Contains(string(body), "tats"):
		// rabbit_mgmt_wm_consumers: 400 "Stats in management UI are disabled on this node".
		return fmt.Errorf("%w: management statistics are disabled on the RabbitMQ node at %s (GET %s answered 400: %s); "+
			"brokernet needs them for the consumer snapshot: unset management.disable_stats and "+
			"management_agent.disable_metrics_collector", ErrSetup, c.base, path, snippet(body))
	case resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("%w: RabbitMQ management at %s refused the credentials of user %q (401); "+
			"the user needs the \"monitoring\" (or \"management\") tag to list every consumer", ErrSetup, c.base, c.user)
	case resp.StatusCode == http.StatusNotFound && path == "/api/overview":
		return fmt.Errorf("%w: %s does not serve the RabbitMQ management API (404 for /api/overview); "+
			"enable the rabbitmq_management plugin or point ?management= at it", ErrSetup, c.base)
	case resp.StatusCode == http.StatusNotFound:
		return &notFoundError{where: "GET " + where}
	default:
		return fmt.Errorf("RabbitMQ management GET %s: HTTP %d: %s", where, resp.StatusCode, snippet(body))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("RabbitMQ management GET %s: malformed JSON: %w", where, err)
	}
	return nil
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
