package config

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

	"github.com/brokernet/brokernet/transport/stomp"
)

// ActiveMQNamespace is the XML namespace of ActiveMQ's broker configuration
// (the xbean schema of activemq.xml).
const ActiveMQNamespace = "http://activemq.apache.org/schema/core"

// DefaultLocalBrokerURI is the local broker ImportActiveMQ writes when it is
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

// ImportActiveMQ reads an ActiveMQ broker XML (Spring/xbean, namespace
// http://activemq.apache.org/schema/core) and returns the equivalent
// brokernet TOML for its <networkConnectors>, plus a warning for every
// option it cannot map (nothing is dropped silently).
//
// The [[broker]] gets localBrokerURI; when that is empty it is
// stomp://127.0.0.1 with the port of the XML's own STOMP transportConnector
// (61613 if there is none). OpenWire member URIs (tcp://host:61616) become
// stomp://host:PORT with the same port, since remote brokers are assumed to be
// configured alike. userName/password (or remoteUserName/remotePassword)
// move into the member URIs. multicast:// discovery becomes gossip:, which
// needs seed members filled in.
//
// Warnings start with "activemq.xml:LINE:" where a line is known; they are
// also written as comments above the connector they concern, and never show a
// password. Connectors are written in document order, their keys in a fixed
// order, so the output is deterministic. The output is checked with Parse; if it does
// not pass (for instance because the XML used ${...} placeholders), the TOML
// and warnings are still returned along with the error, for the user to fix.
func ImportActiveMQ(activemqXML []byte, localBrokerURI string) (toml string, warnings []string, err error) {
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

	brokerName := DefaultBrokerName
	if s, ok := brokerEl.attr("brokerName"); ok && validName(s) == "" && !strings.Contains(s, "${") {
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
		for _, k := range connectorKeys {
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
	if _, err := Parse("imported.toml", []byte(out)); err != nil {
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
			im.warnf(n.line, "transportConnector %q: cannot read its port; STOMP port %d assumed", shorten(redactString(raw)), stomp.DefaultPort)
			return
		}
		best, im.stompPort = r, p
		name, _ := n.attr("name")
		im.stompSource = fmt.Sprintf("this broker's transportConnector %q (%s)", name, u.Scheme)
	})
}

// Attributes of <networkConnector> by what becomes of them.
var (
	importBools = []string{"duplex", "conduitSubscriptions", "dynamicOnly", "decreaseNetworkConsumerPriority",
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
			warn("%s=%q: property placeholders are not expanded; left out", k, shorten(v))
			continue
		case slices.Contains(importBools, k):
			b, ok := parseSpringBool(v)
			if !ok {
				warn("%s=%q is not a boolean; left out", k, shorten(v))
				continue
			}
			c.values[k] = strconv.FormatBool(b)
			continue
		case slices.Contains(importInts, k):
			i, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				warn("%s=%q is not an integer; left out", k, shorten(v))
				continue
			}
			c.values[k] = strconv.Itoa(i)
			continue
		}
		if strings.Contains(strings.ToLower(k), "password") {
			unmapped = append(unmapped, k)
		} else {
			unmapped = append(unmapped, fmt.Sprintf("%s=%q", k, shorten(v)))
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
			warn("userName/password are now in the member URIs (stomp://user:***@host), so the config file holds credentials: keep it private (chmod 600)")
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
	shown := shorten(redactString(raw))
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

	var out, mapped []string
	for _, m := range members {
		s, from, ok := im.member(m, userinfo, warn)
		if !ok {
			c.values["uri"] = tomlQuote(raw)
			return
		}
		out = append(out, s)
		if from != "" {
			mapped = append(mapped, from)
		}
	}
	if len(mapped) > 0 {
		src := im.stompSource
		if src == "" {
			src = "assumed: ActiveMQ's default, as the XML has no STOMP transportConnector"
		} else {
			src = "as on " + src
		}
		warn("OpenWire member URIs now use STOMP: %s; STOMP port %d %s; check the remote brokers' STOMP ports", strings.Join(mapped, ", "), im.stompPort, src)
	}
	if kind == "masterslave" && len(out) < 2 {
		kind = "static"
	}
	c.values["uri"] = tomlQuote(kind + ":(" + strings.Join(out, ",") + ")")
	im.discoveryOptions(c, query, warn)
}

// member translates one member URI to STOMP. from is "tcp://h:61616 → stomp://h:61613"
// (without credentials) when an OpenWire URI was mapped.
func (im *importer) member(m string, userinfo *url.Userinfo, warn func(string, ...any)) (s, from string, ok bool) {
	shown := shorten(redactString(m))
	u, err := url.Parse(strings.TrimSpace(m))
	if err != nil || u.Host == "" {
		warn("member uri %q cannot be read; write the uri by hand", shown)
		return "", "", false
	}
	openwire := true
	scheme := strings.ToLower(u.Scheme)
	switch scheme {
	case "tcp", "nio", "auto", "auto+nio":
		u.Scheme = "stomp"
	case "ssl", "nio+ssl", "auto+ssl", "auto+nio+ssl":
		u.Scheme = "stomp+ssl"
	case "stomp", "stomp+nio":
		u.Scheme, openwire = "stomp", false
	case "stomp+ssl", "stomp+nio+ssl":
		u.Scheme, openwire = "stomp+ssl", false
	default:
		warn("member uri %q: transport %q cannot be bridged over STOMP; write the uri by hand", shown, u.Scheme)
		return "", "", false
	}
	if u.RawQuery != "" {
		warn("member %s: transport options %q dropped", u.Host, u.RawQuery)
		u.RawQuery = ""
	}
	orig := u.Host
	if openwire {
		u.Host = hostWithPort(u.Hostname(), im.stompPort)
		from = fmt.Sprintf("%s://%s → %s://%s", scheme, orig, u.Scheme, u.Host)
	}
	if u.User == nil {
		u.User = userinfo
	}
	u.Path, u.Fragment = "", ""
	return u.String(), from, true
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
		warn("discovery options %q cannot be read; dropped", shorten(query))
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
				unmapped = append(unmapped, fmt.Sprintf("%s=%q", a.Name.Local, shorten(a.Value)))
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
