// Package activemqxml imports the network connectors of an ActiveMQ broker
// configuration (activemq.xml) as a brokernet federation file, mapping what
// it can and warning about the rest (`brokernet import`).
package activemqxml

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/brokernet/brokernet/config"
	"github.com/brokernet/brokernet/internal/uriredact"
	"github.com/brokernet/brokernet/transport/openwire"
	"github.com/brokernet/brokernet/transport/stomp"
)

// ActiveMQNamespace is the XML namespace of ActiveMQ's broker configuration
// (the xbean schema of activemq.xml).
const ActiveMQNamespace = "http://activemq.apache.org/schema/core"

// DefaultLocalBrokerURI is the local broker Import writes when it is
// given none and the XML has no STOMP transportConnector.
const DefaultLocalBrokerURI = "stomp://127.0.0.1:61613"

// xmlNode is an element of the parsed XML.
type xmlNode struct {
	name  xml.Name
	attrs []xml.Attr
	kids  []*xmlNode
	line  int
}

// attr returns the value of the attribute with local name n.
func (n *xmlNode) attr(local string) (string, bool) {
	for _, a := range n.attrs {
		if a.Name.Local == local && a.Name.Space != "xmlns" && a.Name.Local != "xmlns" {
			return a.Value, true
		}
	}
	return "", false
}

// walk calls f for n and every element below it, in document order.
func (n *xmlNode) walk(f func(*xmlNode)) {
	f(n)
	for _, k := range n.kids {
		k.walk(f)
	}
}

// parseXML reads the whole document into a tree, with line numbers.
func parseXML(data []byte) (*xmlNode, error) {
	dec := xml.NewDecoder(bytes.NewReader(data))
	root := &xmlNode{}
	stack := []*xmlNode{root}
	line, counted := 1, 0 // line of byte offset counted
	for {
		// Character data is a token of its own, so the offset before a start
		// element's token is that of its '<'.
		off := int(dec.InputOffset())
		if off > len(data) {
			off = len(data)
		}
		line += bytes.Count(data[counted:off], []byte("\n"))
		counted = off
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading activemq.xml: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if len(stack) > 256 {
				return nil, errors.New("reading activemq.xml: elements nested too deeply")
			}
			n := &xmlNode{name: t.Name, attrs: slices.Clone(t.Attr), line: line}
			top := stack[len(stack)-1]
			top.kids = append(top.kids, n)
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
	return root, nil
}

// importer accumulates the translation of one activemq.xml.
type importer struct {
	warns []string
	// stompPort is the port of the XML's own STOMP (or auto) transport
	// connector; remote brokers are assumed to listen on the same one.
	stompPort   int
	stompSource string
	// gossips counts connectors turned into gossip:, each of which needs a
	// port of its own.
	gossips int
}

func (im *importer) warnf(line int, format string, args ...any) {
	msg := strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " ")
	if line > 0 {
		msg = fmt.Sprintf("activemq.xml:%d: %s", line, msg)
	}
	im.warns = append(im.warns, msg)
}

// importedConnector is one [[networkConnector]] to write.
type importedConnector struct {
	name   string
	line   int
	values map[string]string // key -> TOML value
	gossip string            // bind address when the connector became gossip:
	warns  []string          // this connector's warnings, also written as comments
}

// Import reads an ActiveMQ broker XML (Spring/xbean, namespace
// http://activemq.apache.org/schema/core) and returns the equivalent
// brokernet TOML for its <networkConnectors>, plus a warning for every
// option it cannot map (nothing is dropped silently).
//
// The [[broker]] gets localBrokerURI; when that is empty it is
// stomp://127.0.0.1 with the port of the XML's own STOMP transportConnector
// (61613 if there is none). OpenWire member URIs (tcp://host:61616, ssl://)
// stay OpenWire on the same port, so JMS messages keep their typed properties
// between the brokers. userName/password (or remoteUserName/remotePassword)
// move into the member URIs. multicast:// discovery becomes gossip:, which
// needs seed members filled in.
//
// Warnings start with "activemq.xml:LINE:" where a line is known; they are
// also written as comments above the connector they concern, and never show a
// password. Connectors are written in document order, their keys in a fixed
// order, so the output is deterministic. The output is checked with Parse; if it does
// not pass (for instance because the XML used ${...} placeholders), the TOML
// and warnings are still returned along with the error, for the user to fix.
func Import(activemqXML []byte, localBrokerURI string) (toml string, warnings []string, err error) {
	root, err := parseXML(activemqXML)
	if err != nil {
		return "", nil, err
	}
	var brokerEl *xmlNode
	root.walk(func(n *xmlNode) {
		if brokerEl == nil && n.name.Local == "broker" && (n.name.Space == ActiveMQNamespace || n.name.Space == "") {
			brokerEl = n
		}
	})
	if brokerEl == nil {
		return "", nil, fmt.Errorf("no <broker xmlns=%q> element: not an ActiveMQ broker configuration", ActiveMQNamespace)
	}
	im := &importer{stompPort: stomp.DefaultPort}
	im.findStompPort(brokerEl)

	brokerName := config.DefaultBrokerName
	if s, ok := brokerEl.attr("brokerName"); ok && config.ValidName(s) == "" && !strings.Contains(s, "${") {
		brokerName = s
	}
	if localBrokerURI == "" {
		localBrokerURI = DefaultLocalBrokerURI
		if im.stompSource != "" {
			localBrokerURI = "stomp://127.0.0.1:" + strconv.Itoa(im.stompPort)
		}
	}

	var conns []*importedConnector
	brokerEl.walk(func(n *xmlNode) {
		switch n.name.Local {
		case "networkConnector":
			conns = append(conns, im.connector(n))
		case "multicastNetworkConnector", "ldapNetworkConnector":
			im.warnf(n.line, "<%s> is not supported; skipped (use a [[networkConnector]] with static:(...) or gossip: instead)", n.name.Local)
		}
	})
	if len(conns) == 0 {
		return "", im.warns, errors.New("no <networkConnector> elements: nothing to import")
	}
	im.uniqueNames(conns)
	im.replay(brokerEl, conns)
	var unset []string
	for _, c := range conns {
		if _, ok := c.values["decreaseNetworkConsumerPriority"]; !ok {
			unset = append(unset, fmt.Sprintf("%q", c.name))
		}
	}
	if len(unset) > 0 {
		im.warnf(0, "networkConnector %s: decreaseNetworkConsumerPriority is not set; brokernet defaults to false like ActiveMQ 5.17, but 5.18+ defaults to true: set it if you relied on that", strings.Join(unset, ", "))
	}

	var b strings.Builder
	b.WriteString("# brokernet federation file, imported from an ActiveMQ activemq.xml by `brokernet import`.\n")
	b.WriteString("# Keys keep ActiveMQ's <networkConnector> attribute names. Review the warnings before use.\n\n")
	b.WriteString("[[broker]]\n")
	fmt.Fprintf(&b, "name = %s\n", tomlQuote(brokerName))
	fmt.Fprintf(&b, "uri = %s\n", tomlQuote(localBrokerURI))
	for _, c := range conns {
		b.WriteString("\n")
		for _, w := range c.warns {
			fmt.Fprintf(&b, "# %s\n", w)
		}
		b.WriteString("[[networkConnector]]\n")
		fmt.Fprintf(&b, "name = %s\n", tomlQuote(c.name))
		fmt.Fprintf(&b, "broker = %s\n", tomlQuote(brokerName))
		for _, k := range config.ConnectorKeys {
			if v, ok := c.values[k]; ok && k != "name" && k != "broker" {
				fmt.Fprintf(&b, "%s = %s\n", k, v)
			}
		}
		if c.gossip != "" {
			b.WriteString("\n  [networkConnector.gossip]\n")
			fmt.Fprintf(&b, "  bind = %s\n", tomlQuote(c.gossip))
			// ActiveMQ's multicast discovery is unencrypted too; say so explicitly.
			b.WriteString("  insecure = true   # gossip unencrypted, as multicast was: set secretKeyFile instead\n")
			b.WriteString("  join = []   # list the other members here, e.g. [\"10.0.0.2:7946\"]\n")
		}
	}
	out := b.String()
	if _, err := config.Parse("imported.toml", []byte(out)); err != nil {
		return out, im.warns, fmt.Errorf("the imported configuration needs editing:\n%w", err)
	}
	return out, im.warns, nil
}

// findStompPort takes the port of the broker's STOMP transportConnector, or
// else of an auto:// one (which detects STOMP too).
func (im *importer) findStompPort(broker *xmlNode) {
	rank := func(scheme string) int {
		switch scheme {
		case "stomp", "stomp+nio":
			return 1
		case "stomp+ssl", "stomp+nio+ssl":
			return 2
		case "auto", "auto+nio":
			return 3
		case "auto+ssl", "auto+nio+ssl":
			return 4
		}
		return 0
	}
	best := 0
	broker.walk(func(n *xmlNode) {
		if n.name.Local != "transportConnector" {
			return
		}
		raw, _ := n.attr("uri")
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			return
		}
		r := rank(strings.ToLower(u.Scheme))
		if r == 0 || (best != 0 && r >= best) {
			return
		}
		p, err := strconv.Atoi(u.Port())
		if err != nil || p <= 0 || p > 65535 {
			im.warnf(n.line, "transportConnector %q: cannot read its port; STOMP port %d assumed", uriredact.Shorten(uriredact.All(raw)), stomp.DefaultPort)
			return
		}
		best, im.stompPort = r, p
		name, _ := n.attr("name")
		im.stompSource = fmt.Sprintf("this broker's transportConnector %q (%s)", name, u.Scheme)
	})
}

// Attributes of <networkConnector> by what becomes of them.
var (
	importBools = []string{"duplex", "conduitSubscriptions", "dynamicOnly", "bridgeTempDestinations", "decreaseNetworkConsumerPriority",
		"suppressDuplicateQueueSubscriptions", "suppressDuplicateTopicSubscriptions"}
	importInts  = []string{"networkTTL", "messageTTL", "consumerTTL", "consumerPriorityBase", "prefetchSize"}
	importCreds = []string{"userName", "password", "remoteUserName", "remotePassword"}
)

// connector translates one <networkConnector>.
func (im *importer) connector(n *xmlNode) *importedConnector {
	c := &importedConnector{line: n.line, values: map[string]string{}}
	warn := func(format string, args ...any) {
		msg := strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " ")
		c.warns = append(c.warns, msg)
		im.warnf(n.line, "networkConnector %q: %s", c.name, msg)
	}
	c.name, _ = n.attr("name")
	if c.name == "" {
		c.name = "NC" // ActiveMQ's default
	}

	creds := map[string]string{}
	var unmapped []string
	for _, a := range n.attrs {
		k, v := a.Name.Local, a.Value
		if a.Name.Space == "xmlns" || k == "xmlns" || k == "name" || k == "uri" {
			continue
		}
		switch {
		case slices.Contains(importCreds, k):
			creds[k] = v
			continue
		case strings.Contains(v, "${"):
			warn("%s=%q: property placeholders are not expanded; left out", k, uriredact.Shorten(v))
			continue
		case slices.Contains(importBools, k):
			b, ok := parseSpringBool(v)
			if !ok {
				warn("%s=%q is not a boolean; left out", k, uriredact.Shorten(v))
				continue
			}
			c.values[k] = strconv.FormatBool(b)
			continue
		case slices.Contains(importInts, k):
			i, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				warn("%s=%q is not an integer; left out", k, uriredact.Shorten(v))
				continue
			}
			c.values[k] = strconv.Itoa(i)
			continue
		}
		if strings.Contains(strings.ToLower(k), "password") {
			unmapped = append(unmapped, k)
		} else {
			unmapped = append(unmapped, fmt.Sprintf("%s=%q", k, uriredact.Shorten(v)))
		}
	}
	if len(unmapped) > 0 {
		warn("attributes brokernet cannot map, left out: %s", strings.Join(unmapped, ", "))
	}

	user, pass := creds["userName"], creds["password"]
	if creds["remoteUserName"] != "" {
		user, pass = creds["remoteUserName"], creds["remotePassword"]
	}
	var userinfo *url.Userinfo
	if user != "" {
		if strings.Contains(user+pass, "${") {
			warn("credentials use property placeholders, which are not expanded; put them into the uri by hand")
		} else {
			userinfo = url.UserPassword(user, pass)
			warn("userName/password are now in the member URIs (tcp://user:***@host), so the config file holds credentials: keep it private (chmod 600)")
			if creds["remoteUserName"] == "" {
				warn("ActiveMQ used these credentials for the local broker too; add them to the [[broker]] uri if it needs them")
			}
		}
	}

	raw, _ := n.attr("uri")
	im.uri(c, raw, userinfo, warn)

	for _, k := range n.kids {
		switch k.name.Local {
		case "staticallyIncludedDestinations", "dynamicallyIncludedDestinations", "excludedDestinations":
			if list := destinations(k, warn); len(list) > 0 {
				q := make([]string, len(list))
				for i, d := range list {
					q[i] = tomlQuote(d)
				}
				c.values[k.name.Local] = "[" + strings.Join(q, ", ") + "]"
			}
		default:
			warn("child element <%s> has no brokernet equivalent; left out", k.name.Local)
		}
	}
	return c
}

// parseSpringBool reads a boolean as Spring converts one.
func parseSpringBool(s string) (bool, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "yes", "on", "1":
		return true, true
	case "false", "no", "off", "0":
		return false, true
	}
	return false, false
}

// destinations translates <queue physicalName="..."/> and <topic .../>
// entries into patterns.
func destinations(list *xmlNode, warn func(string, ...any)) []string {
	var out []string
	for _, d := range list.kids {
		var scheme string
		switch d.name.Local {
		case "queue":
			scheme = "queue://"
		case "topic":
			scheme = "topic://"
		case "tempQueue":
			scheme = "temp-queue://"
		case "tempTopic":
			scheme = "temp-topic://"
		default:
			warn("<%s> in <%s>: want <queue physicalName=...> or <topic physicalName=...>; left out", d.name.Local, list.name.Local)
			continue
		}
		name, ok := d.attr("physicalName")
		if !ok || strings.TrimSpace(name) == "" {
			warn("<%s> in <%s> without physicalName; left out", d.name.Local, list.name.Local)
			continue
		}
		if i := strings.IndexByte(name, '?'); i >= 0 {
			warn("%s%s: destination options %q are not supported; dropped", scheme, name[:i], name[i:])
			name = name[:i]
		}
		// A comma makes an ActiveMQ composite destination: one entry each.
		for _, part := range strings.Split(name, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, scheme+part)
			}
		}
	}
	return out
}

// uri translates the connector's discovery URI into c.values["uri"] (and the
// reconnect keys from its options).
func (im *importer) uri(c *importedConnector, raw string, userinfo *url.Userinfo, warn func(string, ...any)) {
	raw = strings.TrimSpace(raw)
	shown := uriredact.Shorten(uriredact.All(raw))
	if raw == "" {
		warn("no uri attribute; write one by hand")
		return
	}
	if strings.Contains(raw, "${") {
		warn("uri %q uses property placeholders, which are not expanded; write it by hand", shown)
		c.values["uri"] = tomlQuote(raw)
		return
	}
	scheme, rest, _ := strings.Cut(raw, ":")
	scheme = strings.ToLower(scheme)
	rest = strings.TrimPrefix(rest, "//")
	var members []string
	var query string
	kind := "static"
	switch scheme {
	case "static", "masterslave":
		kind = scheme
		inner, after, ok := splitParens(rest)
		if !ok {
			warn("uri %q: want %s:(uri,uri,...); write it by hand", shown, scheme)
			c.values["uri"] = tomlQuote(raw)
			return
		}
		members, query = splitTop(inner), strings.TrimPrefix(after, "?")
		if kind == "static" && len(members) == 1 && strings.HasPrefix(strings.ToLower(members[0]), "failover:") {
			inner, _, ok := splitParens(strings.TrimPrefix(members[0][len("failover:"):], "//"))
			if ok {
				members = splitTop(inner)
				if len(members) > 1 {
					kind = "masterslave"
					warn("static:(failover:(...)) became masterslave:(...): one bridge to whichever member answers, in the order given")
				}
			}
		}
	case "failover":
		inner, after, ok := splitParens(rest)
		if !ok {
			warn("uri %q: want failover:(uri,uri,...); write it by hand", shown)
			return
		}
		members, query = splitTop(inner), ""
		if after != "" {
			warn("failover options %q dropped", after)
		}
		if len(members) > 1 {
			kind = "masterslave"
			warn("failover:(...) became masterslave:(...): one bridge to whichever member answers, in the order given")
		}
	case "multicast":
		c.values["uri"] = tomlQuote("gossip:")
		c.gossip = fmt.Sprintf("0.0.0.0:%d", 7946+im.gossips)
		im.gossips++
		warn("uri %q: multicast discovery is not supported; converted to gossip:, where every brokernet process joins a gossip cluster: list seed members in [networkConnector.gossip] join, and set its advertiseBrokerURI to the local broker's address as the others reach it", shown)
		return
	default:
		members = []string{raw}
	}

	var out, renamed []string
	for _, m := range members {
		s, r, ok := im.member(m, userinfo, warn)
		if !ok {
			c.values["uri"] = tomlQuote(raw)
			return
		}
		out = append(out, s)
		if r != "" {
			renamed = append(renamed, r)
		}
	}
	if len(renamed) > 0 {
		warn("member URIs written in brokernet's OpenWire schemes (same protocol and port): %s", strings.Join(renamed, ", "))
	}
	if kind == "masterslave" && len(out) < 2 {
		kind = "static"
	}
	c.values["uri"] = tomlQuote(kind + ":(" + strings.Join(out, ",") + ")")
	im.discoveryOptions(c, query, warn)
}

// member translates one member URI. OpenWire members (tcp://, ssl://, and
// ActiveMQ's nio/auto variants of them) stay OpenWire, brokernet's own
// transport for them, on the same port; STOMP members stay STOMP. Transport
// options the OpenWire URI takes (wireFormat.*, clientId, ...) are kept, the
// others dropped with a warning. renamed is "nio://h:1 → tcp://h:1" (without
// credentials) when the scheme changed.
func (im *importer) member(m string, userinfo *url.Userinfo, warn func(string, ...any)) (s, renamed string, ok bool) {
	shown := uriredact.Shorten(uriredact.All(m))
	u, err := url.Parse(strings.TrimSpace(m))
	if err != nil || u.Host == "" {
		warn("member uri %q cannot be read; write the uri by hand", shown)
		return "", "", false
	}
	scheme := strings.ToLower(u.Scheme)
	isOpenWire := true
	switch scheme {
	case "tcp", "nio", "auto", "auto+nio":
		u.Scheme = "tcp"
	case "ssl", "nio+ssl", "auto+ssl", "auto+nio+ssl":
		u.Scheme = "ssl"
	case "stomp", "stomp+nio":
		u.Scheme, isOpenWire = "stomp", false
	case "stomp+ssl", "stomp+nio+ssl":
		u.Scheme, isOpenWire = "stomp+ssl", false
	default:
		warn("member uri %q: transport %q cannot be bridged (brokernet speaks OpenWire tcp:// and ssl://, STOMP and AMQP 1.0); write the uri by hand", shown, u.Scheme)
		return "", "", false
	}
	if u.RawQuery != "" {
		kept, dropped := url.Values{}, []string{}
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil || !isOpenWire {
			dropped = append(dropped, u.RawQuery)
		} else {
			keys := make([]string, 0, len(q))
			for k := range q {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				one := url.Values{k: {q.Get(k)}}
				if _, err := openwire.ParseURI(u.Scheme + "://h?" + one.Encode()); err == nil {
					kept.Set(k, q.Get(k))
				} else {
					dropped = append(dropped, k+"="+q.Get(k))
				}
			}
		}
		if len(dropped) > 0 {
			warn("member %s: transport options %q dropped", u.Host, strings.Join(dropped, "&"))
		}
		u.RawQuery = kept.Encode()
	}
	if scheme != u.Scheme {
		renamed = fmt.Sprintf("%s://%s → %s://%s", scheme, u.Host, u.Scheme, u.Host)
	}
	if u.User == nil {
		u.User = userinfo
	}
	u.Path, u.Fragment = "", ""
	return u.String(), renamed, true
}

// hostWithPort joins host and port, bracketing IPv6 addresses.
func hostWithPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}

// discoveryOptions maps static:/masterslave: URI options onto reconnect keys.
func (im *importer) discoveryOptions(c *importedConnector, query string, warn func(string, ...any)) {
	if query == "" {
		return
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		warn("discovery options %q cannot be read; dropped", uriredact.Shorten(query))
		return
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var dropped []string
	for _, k := range keys {
		v := q.Get(k)
		switch k {
		case "initialReconnectDelay", "maxReconnectDelay":
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil || ms <= 0 || ms > int64(1<<53) {
				warn("%s=%q is not a positive number of milliseconds; dropped", k, v)
				continue
			}
			c.values[k] = tomlQuote(formatDuration(time.Duration(ms) * time.Millisecond))
		case "backOffMultiplier":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 1 {
				warn("backOffMultiplier=%q is not a number >= 1; dropped", v)
				continue
			}
			if _, set := c.values[k]; !set {
				c.values[k] = formatFloat(f)
			}
		case "useExponentialBackOff":
			if b, ok := parseSpringBool(v); ok && !b {
				c.values["backOffMultiplier"] = "1.0" // a constant delay, as ActiveMQ without back-off
			}
		default:
			dropped = append(dropped, k+"="+v)
		}
	}
	if len(dropped) > 0 {
		warn("discovery options brokernet has no equivalent for, dropped: %s", strings.Join(dropped, ", "))
	}
}

// uniqueNames renames connectors whose name is taken, as brokernet requires
// unique names.
func (im *importer) uniqueNames(conns []*importedConnector) {
	taken := map[string]bool{}
	for _, c := range conns {
		taken[c.name] = true
	}
	seen := map[string]bool{}
	for _, c := range conns {
		if !seen[c.name] {
			seen[c.name] = true
			continue
		}
		old := c.name
		for i := 2; ; i++ {
			if n := fmt.Sprintf("%s-%d", old, i); !taken[n] {
				c.name = n
				break
			}
		}
		taken[c.name], seen[c.name] = true, true
		msg := fmt.Sprintf("renamed from %q, which an earlier connector has (brokernet needs unique names)", old)
		c.warns = append(c.warns, msg)
		im.warnf(c.line, "networkConnector %q: %s", c.name, msg)
	}
}

// replay maps conditionalNetworkBridgeFilterFactory (a destination policy in
// ActiveMQ) onto every connector, where brokernet keeps it.
func (im *importer) replay(broker *xmlNode, conns []*importedConnector) {
	broker.walk(func(n *xmlNode) {
		if n.name.Local != "conditionalNetworkBridgeFilterFactory" {
			return
		}
		var unmapped []string
		for _, a := range n.attrs {
			switch a.Name.Local {
			case "replayWhenNoConsumers":
				if b, ok := parseSpringBool(a.Value); ok {
					for _, c := range conns {
						c.values["replayWhenNoConsumers"] = strconv.FormatBool(b)
					}
				}
			case "replayDelay":
				if ms, err := strconv.ParseInt(strings.TrimSpace(a.Value), 10, 64); err == nil && ms >= 0 && ms <= 1<<53 {
					for _, c := range conns {
						c.values["replayDelay"] = tomlQuote(formatDuration(time.Duration(ms) * time.Millisecond))
					}
				}
			default:
				unmapped = append(unmapped, fmt.Sprintf("%s=%q", a.Name.Local, uriredact.Shorten(a.Value)))
			}
		}
		im.warnf(n.line, "conditionalNetworkBridgeFilterFactory is a per-destination policy in ActiveMQ but per connector in brokernet: its replay settings now apply to every connector")
		if len(unmapped) > 0 {
			im.warnf(n.line, "conditionalNetworkBridgeFilterFactory attributes brokernet cannot map, left out: %s", strings.Join(unmapped, ", "))
		}
	})
}

// splitParens splits "(inner)after" at the parenthesis matching the first one.
func splitParens(s string) (inner, after string, ok bool) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "(") {
		return "", "", false
	}
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return s[1:i], s[i+1:], true
			}
		}
	}
	return "", "", false
}

// splitTop splits s at commas outside parentheses.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

// formatDuration writes d as a Go duration in its largest whole unit.
func formatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// formatFloat writes f as a TOML float.
func formatFloat(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return s
}

// tomlQuote writes s as a TOML basic string.
func tomlQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
