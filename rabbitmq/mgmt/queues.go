package mgmt

import (
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
)

// The calls below change the broker: they bind and delete the queues that
// transport/amqp declares for its topic subscriptions (RabbitMQ 3.10's AMQP 1.0
// plugin can neither bind a queue of the client's choosing nor make a topic
// source's queue go with its link).

// ErrInUse is returned by DeleteQueue with ifUnused when the queue has
// consumers: the queue itself refused, so the answer is exact, unlike the
// consumer counts of the (delayed) statistics.
var ErrInUse = errors.New("queue in use")

// Queue is one item of GET /api/queues/{vhost}.
type Queue struct {
	Name string `json:"name"`
	// Consumers comes from the statistics: up to one collection interval
	// (5 s by default) late, absent for a queue they have not seen yet.
	Consumers int `json:"consumers"`
}

// Queues reads GET /api/queues/{vhost}: the names and consumer counts of the
// queues whose name contains substr ("" for all), 500 a page (the API filters
// by name only when paginating), so that a broker with many queues is not
// listed whole.
func (c *Client) Queues(ctx context.Context, vhost, substr string) ([]Queue, error) {
	var out []Queue
	for page := 1; ; page++ {
		q := url.Values{"page": {strconv.Itoa(page)}, "page_size": {"500"}, "columns": {"name,consumers"}}
		if substr != "" {
			q.Set("name", substr)
			q.Set("use_regex", "false")
		}
		body, err := c.call(ctx, http.MethodGet, "/api/queues/"+url.PathEscape(vhost), q.Encode(), nil)
		if err != nil {
			return nil, err
		}
		var p struct {
			Items     []Queue `json:"items"`
			PageCount int     `json:"page_count"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			return nil, fmt.Errorf("RabbitMQ management GET %s/api/queues/%s: malformed JSON: %w", c.base, url.PathEscape(vhost), err)
		}
		out = append(out, p.Items...)
		if page >= p.PageCount || len(p.Items) == 0 {
			return out, nil
		}
	}
}

// Bind binds queue to exchange with routing key key (no arguments). Binding
// twice is no error: RabbitMQ keeps one binding.
func (c *Client) Bind(ctx context.Context, vhost, exchange, queue, key string) error {
	body, _ := json.Marshal(map[string]any{"routing_key": key, "arguments": map[string]any{}})
	_, err := c.call(ctx, http.MethodPost, bindingsPath(vhost, exchange, queue), "", body)
	return err
}

// Unbind removes the binding of queue to exchange with key and no arguments;
// a missing binding or queue is no error.
func (c *Client) Unbind(ctx context.Context, vhost, exchange, queue, key string) error {
	body, err := c.call(ctx, http.MethodGet, bindingsPath(vhost, exchange, queue), "", nil)
	var nf *notFoundError
	if errors.As(err, &nf) {
		return nil
	}
	if err != nil {
		return err
	}
	var bs []struct {
		RoutingKey    string         `json:"routing_key"`
		PropertiesKey string         `json:"properties_key"`
		Arguments     map[string]any `json:"arguments"`
	}
	if err := json.Unmarshal(body, &bs); err != nil {
		return fmt.Errorf("RabbitMQ management bindings of %s: malformed JSON: %w", queue, err)
	}
	for _, b := range bs {
		if b.RoutingKey != key || len(b.Arguments) != 0 {
			continue
		}
		// The properties key names the binding (the routing key, escaped, and
		// a hash of the arguments when there are any).
		_, err := c.call(ctx, http.MethodDelete, bindingsPath(vhost, exchange, queue)+"/"+url.PathEscape(b.PropertiesKey), "", nil)
		if errors.As(err, &nf) {
			return nil
		}
		return err
	}
	return nil
}

func bindingsPath(vhost, exchange, queue string) string {
	return "/api/bindings/" + url.PathEscape(vhost) + "/e/" + url.PathEscape(exchange) + "/q/" + url.PathEscape(queue)
}

// DeleteQueue deletes a queue with its messages. With ifUnused the queue
// refuses when it has a consumer: ErrInUse. A missing queue is no error; the
// result says whether this call deleted it.
func (c *Client) DeleteQueue(ctx context.Context, vhost, name string, ifUnused bool) (bool, error) {
	q := ""
	if ifUnused {
		q = "if-unused=true"
	}
	_, err := c.call(ctx, http.MethodDelete, "/api/queues/"+url.PathEscape(vhost)+"/"+url.PathEscape(name), q, nil)
	var nf *notFoundError
	switch {
	case errors.As(err, &nf):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// call makes one request and returns the body of a 2xx answer. Errors name the
// URL without credentials; 404 is a *notFoundError; a queue in use (400 from
// if-unused) is ErrInUse.
func (c *Client) call(ctx context.Context, method, path, query string, body []byte) ([]byte, error) {
	status, out, err := c.do(ctx, method, path, query, body)
	if err != nil {
		return nil, err
	}
	where := method + " " + c.base.String() + path
	switch {
	case status/100 == 2:
		return out, nil
	case status == http.StatusNotFound:
		return nil, &notFoundError{where: where}
	case status == http.StatusUnauthorized:
		return nil, fmt.Errorf("%w: RabbitMQ management at %s refused the credentials of user %q (401)", ErrSetup, c.base, c.user)
	case status == http.StatusForbidden:
		return nil, fmt.Errorf("%w: RabbitMQ management %s: user %q may not (403): %s", ErrSetup, where, c.user, snippet(out))
	case status == http.StatusBadRequest && strings.Contains(string(out), "in use"):
		// rabbit_mgmt_wm_queue: {"error":"bad_request","reason":"queue 'X' in vhost '/' in use"}.
		return nil, fmt.Errorf("RabbitMQ management %s: %w", where, ErrInUse)
	}
	return nil, fmt.Errorf("RabbitMQ management %s: HTTP %d: %s", where, status, snippet(out))
}

// do makes one request and returns the answer's status and body.
func (c *Client) do(ctx context.Context, method, path, query string, body []byte) (status int, out []byte, err error) {
	u := *c.base
	u.RawPath = u.Path + path
	u.Path, _ = url.PathUnescape(u.RawPath)
	u.RawQuery = query
	where := method + " " + c.base.String() + path
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return 0, nil, fmt.Errorf("RabbitMQ management %s: %w", where, err)
	}
	req.SetBasicAuth(c.user, c.pass)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return 0, nil, fmt.Errorf("%w at %s (is the rabbitmq_management plugin enabled? set ?management= to its URL): %v",
				ErrUnreachable, c.base, err)
		}
		return 0, nil, fmt.Errorf("RabbitMQ management %s: %w", where, err)
	}
	defer resp.Body.Close()
	out, err = io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return 0, nil, fmt.Errorf("RabbitMQ management %s: reading the answer: %w", where, err)
	}
	return resp.StatusCode, out, nil
}

// Limits is what a queue takes before it refuses: its length limits and how
// it overflows, from its arguments and its effective policy, with its
// current contents.
type Limits struct {
	// Overflow is "drop-head" (RabbitMQ's default), "reject-publish" or
	// "reject-publish-dlx".
	Overflow string
	// MaxLength and MaxBytes are the limits in messages and in bytes of
	// message bodies; 0: none.
	MaxLength, MaxBytes int
	// Messages and Bytes are what the queue holds, from the statistics: up
	// to one collection interval (5 s by default) late.
	Messages, Bytes int
}

// Refuses reports whether the queue refuses what overflows (RabbitMQ 3.10
// ends the connection of a publisher it refuses, STOMP and AMQP 1.0 alike).
func (l Limits) Refuses() bool {
	return (l.Overflow == "reject-publish" || l.Overflow == "reject-publish-dlx") && (l.MaxLength > 0 || l.MaxBytes > 0)
}

// queueLimits is the part of GET /api/queues/{vhost}/{name} Limits reads.
type queueLimits struct {
	Arguments map[string]any `json:"arguments"`
	Policy    map[string]any `json:"effective_policy_definition"`
	Messages  int            `json:"messages"`
	Bytes     int            `json:"message_bytes"`
}

// QueueLimits reads a queue's limits (GET /api/queues/{vhost}/{name}). Where
// both its arguments and its policy set a length limit the lower applies, as
// RabbitMQ does; for the overflow behaviour the argument wins. A missing
// queue is a *notFoundError: ok is false.
func (c *Client) QueueLimits(ctx context.Context, vhost, name string) (l Limits, ok bool, err error) {
	var q queueLimits
	err = c.get(ctx, "/api/queues/"+url.PathEscape(vhost)+"/"+url.PathEscape(name), &q)
	var nf *notFoundError
	if errors.As(err, &nf) {
		return Limits{}, false, nil
	}
	if err != nil {
		return Limits{}, false, err
	}
	return q.limits(), true, nil
}

func (q queueLimits) limits() Limits {
	l := Limits{Overflow: "drop-head", Messages: q.Messages, Bytes: q.Bytes}
	if s, ok := q.Policy["overflow"].(string); ok {
		l.Overflow = s
	}
	if s, ok := q.Arguments["x-overflow"].(string); ok {
		l.Overflow = s
	}
	lower := func(cur int, v any) int {
		f, ok := v.(float64)
		if !ok || f < 0 {
			return cur
		}
		if n := int(f); cur == 0 || n < cur {
			return n
		}
		return cur
	}
	l.MaxLength = lower(lower(0, q.Arguments["x-max-length"]), q.Policy["max-length"])
	l.MaxBytes = lower(lower(0, q.Arguments["x-max-length-bytes"]), q.Policy["max-length-bytes"])
	return l
}
