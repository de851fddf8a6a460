// Package hop is the codec of brokernet's loop and TTL prevention: the hop
// path headers every forwarded message carries (BrokernetPath, BrokernetHops,
// BrokernetFor) and the demand selectors that filter on them while carrying
// the demand tag (path and origin of the demand) that other bridges read back
// from consumer advisories.
package hop

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// A brokernet demand subscription is an ordinary STOMP consumer. Other bridges
// watching its broker learn about it only through its consumer advisory, whose
// fields are fixed by ActiveMQ (selector, priority, prefetchSize, consumerId,
// destination; see activemq-network.md §6.1). brokernet therefore writes both
// its message-hop filter and its demand metadata into the selector:
//
//	(<user>) AND (BrokernetPath IS NULL OR BrokernetPath NOT LIKE '%|<id>|%' ESCAPE '\')
//	  AND (BrokernetHops IS NULL OR BrokernetHops < <maxHops>) AND 'brokernet' <> '<tag>'
//
// (on one line). The last clause is always true; its only purpose is to carry
// the tag literal, for example 'v1;path=A,B;origin=ID:x'.
//
// A replay subscription (see ReplaySelector) inverts the hop filter: it
// takes only the messages that already visited the remote broker, the ones
// the filter above withholds, and its tag ends in ";replay":
//
//	(<user>) AND BrokernetPath LIKE '%|<id>|%' ESCAPE '\' AND 'brokernet' <> '<tag>'

// Headers that brokernet sets on every message it forwards.
const (
	// PathHeader names the header that lists, as "|ID1|ID2|", the ids of the
	// brokers the message has already left, oldest first (see FormatPath).
	PathHeader = "BrokernetPath"
	// HopsHeader names the header that holds the number of entries of
	// PathHeader in decimal.
	HopsHeader = "BrokernetHops"
	// MovesHeader names the header of a replayed message (ReplaySelector)
	// that counts its replays, in decimal: how often it went back to a broker
	// it had left because its consumer moved there.
	MovesHeader = "BrokernetMoves"
	// MovedAtHeader names the header of a replayed message that holds when
	// it was last replayed, in Unix milliseconds of the replaying bridge's
	// clock (the cool-down of the next replay counts from it).
	MovedAtHeader = "BrokernetMovedAt"
	// ForHeader names the header of a forwarded topic message that lists, as
	// "|ID1|ID2|", the brokers the previous broker sent it here for: the Tag.For
	// of the demand subscriptions that took it there (see FormatPath).
	ForHeader = "BrokernetFor"
)

// ConvertStringPrefix is the prefix ActiveMQ puts in front of every selector
// that arrives over STOMP, so that string-valued headers compare as numbers
// (SelectorParser CONVERT_STRING_EXPRESSIONS_PREFIX). Advisories show it.
const ConvertStringPrefix = "convert_string_expressions:"

// Fixed pieces of the generated selector.
const (
	pathClauseStart   = "(BrokernetPath IS NULL OR BrokernetPath NOT LIKE '"
	pathClauseEnd     = `' ESCAPE '\')`
	hopsClauseStart   = " AND (BrokernetHops IS NULL OR BrokernetHops < "
	forClauseStart    = " AND (BrokernetPath IS NULL OR BrokernetFor LIKE '"
	forClauseEnd      = `' ESCAPE '\')`
	tagClauseStart    = " AND 'brokernet' <> '"
	replayClauseStart = "BrokernetPath LIKE '"
	replayClauseEnd   = `' ESCAPE '\'`
	movesClauseStart  = " AND (BrokernetMoves IS NULL OR BrokernetMoves < "
	tagVersion        = "v1"
	tagPathField      = ";path="
	tagOriginField    = ";origin="
	tagReplayField    = ";replay"
)

// Tag is the demand metadata a brokernet demand subscription carries in its
// selector, the counterpart of ActiveMQ's ConsumerInfo brokerPath and
// networkConsumerIds.
type Tag struct {
	// Path lists the ids of the brokers the demand came through, the original
	// consumer's broker first. It is never empty for a demand subscription;
	// an empty Path is encoded by omitting it and decodes as nil.
	Path []string
	// Origin identifies what the demand is for, the same on every route
	// to it: the id of the original consumer, or a name for a group of
	// consumers (a conduit subscription's origin names the broker and
	// destination of the consumers it serves; static includes use
	// "static"). Together with Path[0], the broker where it lives, it tells
	// duplicate routes apart from distinct demand.
	Origin string
	// Replay marks a replay subscription (see ReplaySelector). It is not
	// demand: other bridges must not forward messages for it.
	Replay bool
	// For, when set, is the broker a topic demand subscription forwards toward
	// (its consumers' broker, Path[0]). Selector then adds a routing clause: a
	// message that arrived from another broker is taken only if the previous
	// broker sent it here for For (ForHeader). Without it a topic message that
	// reached a broker for that broker's own subscribers would travel on along
	// every other route too, and subscribers in a looped or branched network
	// would get copies. It is written as a clause, not in the tag literal.
	For string
}

// Selector builds the full selector of a demand subscription.
//
// It combines the user's selector (may be ""), a hop filter that keeps the
// local broker from dispatching to this subscription any message that has
// already visited the broker notVisited, or has already made maxHops hops or
// more, and the tag as an always-true clause. A negative maxHops means
// unlimited and omits the hops clause.
//
// The user selector is wrapped in parentheses verbatim. ActiveMQ only accepts
// consumers with syntactically valid selectors, so a user selector seen in an
// advisory cannot unbalance the result. (A trailing "--" is not a comment
// unless a line break follows it, and the generated part has none.)
// ParseSelector inverts Selector exactly.
func Selector(user string, notVisited string, maxHops int, tag Tag) string {
	var b strings.Builder
	writeUserHead(&b, user)
	b.WriteString(pathClauseStart)
	b.WriteString(sqlString(likePattern(notVisited)))
	b.WriteString(pathClauseEnd)
	if maxHops >= 0 {
		b.WriteString(hopsClauseStart)
		b.WriteString(strconv.Itoa(maxHops))
		b.WriteString(")")
	}
	if tag.For != "" {
		b.WriteString(forClauseStart)
		b.WriteString(sqlString(likePattern(tag.For)))
		b.WriteString(forClauseEnd)
	}
	writeTagClause(&b, tag)
	return b.String()
}

// writeUserHead writes "(<user>) AND " unless user is empty; cutUserHead
// inverts it.
func writeUserHead(b *strings.Builder, user string) {
	if user != "" {
		b.WriteString("(")
		b.WriteString(user)
		b.WriteString(") AND ")
	}
}

// writeTagClause writes the trailing always-true tag clause; cutTagClause
// inverts it.
func writeTagClause(b *strings.Builder, tag Tag) {
	b.WriteString(tagClauseStart)
	b.WriteString(sqlString(tag.literal()))
	b.WriteString("'")
}

// ReplaySelector builds the selector of a replay subscription: the
// counterpart of ActiveMQ's ConditionalNetworkBridgeFilter with
// replayWhenNoConsumers (activemq-network.md §2.7).
//
// It lets through only messages that already visited the broker visited
// (their PathHeader lists it) and match the user selector (may be ""): the
// messages that the hop filter of every Selector for that broker withholds,
// so a replay subscription and the demand subscriptions of the same bridge
// never compete for a message. There is no hops clause, because ActiveMQ's
// replay branch does not apply messageTTL either; maxMoves > 0 caps the
// replays instead (MovesHeader), so that a message whose consumers keep
// moving does not bounce between brokers for ever:
//
//	... ESCAPE '\' AND (BrokernetMoves IS NULL OR BrokernetMoves < <maxMoves>) AND 'brokernet' <> '<tag>'
//
// The tag is written with Replay set, whatever tag.Replay says.
// ParseSelector inverts it.
func ReplaySelector(user string, visited string, maxMoves int, tag Tag) string {
	tag.Replay = true
	var b strings.Builder
	writeUserHead(&b, user)
	b.WriteString(replayClauseStart)
	b.WriteString(sqlString(likePattern(visited)))
	b.WriteString(replayClauseEnd)
	if maxMoves > 0 {
		b.WriteString(movesClauseStart)
		b.WriteString(strconv.Itoa(maxMoves))
		b.WriteString(")")
	}
	writeTagClause(&b, tag)
	return b.String()
}

// WithheldSelector selects the messages that the hop filter of every Selector
// for notVisited and maxHops withholds: those that already visited notVisited
// or made maxHops hops (a negative maxHops means unlimited). The bridge browses
// its demanded queues with it to count the messages its demand cannot take
// (stuck messages). It carries no tag: it is never a consumer's selector.
func WithheldSelector(notVisited string, maxHops int) string {
	var b strings.Builder
	b.WriteString(replayClauseStart)
	b.WriteString(sqlString(likePattern(notVisited)))
	b.WriteString(replayClauseEnd)
	if maxHops >= 0 {
		b.WriteString(" OR BrokernetHops >= ")
		b.WriteString(strconv.Itoa(maxHops))
	}
	return b.String()
}

// ParseSelector splits a selector seen in an advisory into the user selector
// and the tag. A leading ConvertStringPrefix is ignored, so the selector may
// be passed with or without it.
//
// It does not trust the user part: it recognises the generated suffix
// anchored at the end, then checks that Selector rebuilds the input exactly.
// So ParseSelector(Selector(u, id, n, tag)) returns (u, tag, true) for every
// u, even one that itself contains brokernet-looking text. It recognises
// ReplaySelector's form too, returning a tag with Replay set. When sel is
// not a brokernet selector, ok is false and user is sel unchanged.
func ParseSelector(sel string) (user string, tag Tag, ok bool) {
	user, tag, _, _, ok = parseSelector(sel)
	if !ok {
		return sel, Tag{}, false
	}
	return user, tag, true
}

// parseSelector is ParseSelector that also returns the hop filter's
// parameters: the broker id of the path clause (not visited, or visited
// for a replay selector) and maxHops (-1 when absent), or a replay
// selector's maxMoves (-1 when absent).
func parseSelector(sel string) (user string, tag Tag, notVisited string, maxHops int, ok bool) {
	s := strings.TrimPrefix(sel, ConvertStringPrefix)
	if user, tag, notVisited, maxHops, ok = parseHopSelector(s); ok {
		return user, tag, notVisited, maxHops, true
	}
	var maxMoves int
	if user, tag, notVisited, maxMoves, ok = parseReplaySelector(s); ok {
		if maxMoves == 0 {
			maxMoves = -1
		}
		return user, tag, notVisited, maxMoves, true
	}
	return "", Tag{}, "", 0, false
}

// cutUserHead splits s at m, where the generated part starts, into the user
// selector: "" when m is 0, else the text of the leading "(<user>) AND ".
func cutUserHead(s string, m int) (string, bool) {
	if m == 0 {
		return "", true
	}
	head := s[:m]
	if len(head) < len("() AND ") || head[0] != '(' || !strings.HasSuffix(head, ") AND ") {
		return "", false
	}
	return head[1 : len(head)-len(") AND ")], true
}

// cutTagClause reads the trailing tag clause of a generated selector.
func cutTagClause(rest string) (Tag, bool) {
	rest, ok := strings.CutPrefix(rest, tagClauseStart)
	if !ok {
		return Tag{}, false
	}
	lit, rest, ok := cutSQLString(rest)
	if !ok || rest != "" {
		return Tag{}, false
	}
	tag, err := parseTagLiteral(lit)
	if err != nil {
		return Tag{}, false
	}
	return tag, true
}

// parseReplaySelector inverts ReplaySelector; s has no ConvertStringPrefix.
func parseReplaySelector(s string) (user string, tag Tag, visited string, maxMoves int, ok bool) {
	// As in parseHopSelector, "'%" occurs in the generated part only where
	// the LIKE pattern starts, so the last occurrence is the real one.
	m := strings.LastIndex(s, replayClauseStart+"%|")
	if m < 0 {
		return "", Tag{}, "", 0, false
	}
	if user, ok = cutUserHead(s, m); !ok {
		return "", Tag{}, "", 0, false
	}
	like, rest, ok := cutSQLString(s[m+len(replayClauseStart):])
	if !ok {
		return "", Tag{}, "", 0, false
	}
	if visited, ok = unlikePattern(like); !ok {
		return "", Tag{}, "", 0, false
	}
	if rest, ok = strings.CutPrefix(rest, replayClauseEnd[1:]); !ok {
		return "", Tag{}, "", 0, false
	}
	if r, found := strings.CutPrefix(rest, movesClauseStart); found {
		digits, after, found := strings.Cut(r, ")")
		if !found {
			return "", Tag{}, "", 0, false
		}
		n, err := strconv.Atoi(digits)
		if err != nil || n <= 0 {
			return "", Tag{}, "", 0, false
		}
		maxMoves, rest = n, after
	}
	if tag, ok = cutTagClause(rest); !ok || !tag.Replay {
		return "", Tag{}, "", 0, false
	}
	if ReplaySelector(user, visited, maxMoves, tag) != s {
		return "", Tag{}, "", 0, false
	}
	return user, tag, visited, maxMoves, true
}

// parseHopSelector inverts Selector; s has no ConvertStringPrefix.
func parseHopSelector(s string) (user string, tag Tag, notVisited string, maxHops int, ok bool) {
	// The LIKE pattern always starts with "%|". The sequence "'%" cannot occur
	// later in a generated selector: '%' in ids is escaped as "\%" and the tag
	// literal holds no quote, so the last occurrence is the real one.
	m := strings.LastIndex(s, pathClauseStart+"%|")
	if m < 0 {
		return "", Tag{}, "", 0, false
	}
	if user, ok = cutUserHead(s, m); !ok {
		return "", Tag{}, "", 0, false
	}
	rest := s[m+len(pathClauseStart):]
	like, rest, ok := cutSQLString(rest)
	if !ok {
		return "", Tag{}, "", 0, false
	}
	notVisited, ok = unlikePattern(like)
	if !ok {
		return "", Tag{}, "", 0, false
	}
	// cutSQLString consumed the closing quote of the LIKE pattern.
	if rest, ok = strings.CutPrefix(rest, pathClauseEnd[1:]); !ok {
		return "", Tag{}, "", 0, false
	}
	maxHops = -1
	if r, found := strings.CutPrefix(rest, hopsClauseStart); found {
		digits, after, found := strings.Cut(r, ")")
		if !found {
			return "", Tag{}, "", 0, false
		}
		n, err := strconv.Atoi(digits)
		if err != nil || n < 0 {
			return "", Tag{}, "", 0, false
		}
		maxHops, rest = n, after
	}
	forID := ""
	if r, found := strings.CutPrefix(rest, forClauseStart); found {
		like, after, ok := cutSQLString(r)
		if !ok {
			return "", Tag{}, "", 0, false
		}
		if forID, ok = unlikePattern(like); !ok {
			return "", Tag{}, "", 0, false
		}
		if rest, ok = strings.CutPrefix(after, forClauseEnd[1:]); !ok {
			return "", Tag{}, "", 0, false
		}
	}
	if tag, ok = cutTagClause(rest); !ok {
		return "", Tag{}, "", 0, false
	}
	tag.For = forID
	if Selector(user, notVisited, maxHops, tag) != s {
		return "", Tag{}, "", 0, false
	}
	return user, tag, notVisited, maxHops, true
}

// sqlString returns s as the body of an SQL string literal: single quotes
// are doubled (SelectorParser STRING_LITERAL).
func sqlString(s string) string {
	return strings.ReplaceAll(s, "'", "''")
}

// cutSQLString reads the body of an SQL string literal whose opening quote
// has already been consumed, up to and including the closing quote. It
// returns the unquoted value and what follows the closing quote.
func cutSQLString(s string) (value, rest string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\'' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '\'' {
			b.WriteByte('\'')
			i++
			continue
		}
		return b.String(), s[i+1:], true
	}
	return "", "", false
}

// likePattern returns the LIKE pattern that matches a PathHeader value
// containing the broker id, escaping LIKE's metacharacters with '\'.
func likePattern(id string) string {
	enc := encodePathID(id)
	var b strings.Builder
	b.WriteString("%|")
	for i := 0; i < len(enc); i++ {
		switch c := enc[i]; c {
		case '%', '_', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteString("|%")
	return b.String()
}

// unlikePattern inverts likePattern.
func unlikePattern(p string) (string, bool) {
	if len(p) < 4 || !strings.HasPrefix(p, "%|") || !strings.HasSuffix(p, "|%") {
		return "", false
	}
	p = p[2 : len(p)-2]
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch c {
		case '\\':
			if i+1 == len(p) {
				return "", false
			}
			i++
			b.WriteByte(p[i])
		case '%', '_':
			return "", false // unescaped LIKE metacharacter: not generated by likePattern
		default:
			b.WriteByte(c)
		}
	}
	id, err := decodePercent(b.String())
	if err != nil {
		return "", false
	}
	return id, true
}

// literal renders the tag as "v1;path=A,B;origin=ID" with the fields
// percent-escaped (see tagNeedsEscape), followed by ";replay" for a replay
// subscription. The path field is omitted when the path is empty, so that a
// path holding one empty id stays distinct.
func (t Tag) literal() string {
	var b strings.Builder
	b.WriteString(tagVersion)
	if len(t.Path) > 0 {
		b.WriteString(tagPathField)
		for i, id := range t.Path {
			if i > 0 {
				b.WriteByte(',')
			}
			escapeBytes(&b, id, tagNeedsEscape)
		}
	}
	b.WriteString(tagOriginField)
	escapeBytes(&b, t.Origin, tagNeedsEscape)
	if t.Replay {
		b.WriteString(tagReplayField)
	}
	return b.String()
}

// errBadTag is returned by parseTagLiteral for any malformed tag.
var errBadTag = errors.New("not a brokernet v1 tag")

// parseTagLiteral inverts Tag.literal.
func parseTagLiteral(s string) (Tag, error) {
	rest, ok := strings.CutPrefix(s, tagVersion)
	if !ok {
		return Tag{}, errBadTag
	}
	var t Tag
	if r, found := strings.CutPrefix(rest, tagPathField); found {
		path, after, found := strings.Cut(r, tagOriginField)
		if !found {
			return Tag{}, errBadTag
		}
		for _, f := range strings.Split(path, ",") {
			id, err := decodePercent(f)
			if err != nil {
				return Tag{}, err
			}
			t.Path = append(t.Path, id)
		}
		rest = tagOriginField + after
	}
	origin, ok := strings.CutPrefix(rest, tagOriginField)
	if !ok {
		return Tag{}, errBadTag
	}
	// The origin escapes ';', so a trailing ";replay" is always the flag.
	origin, t.Replay = strings.CutSuffix(origin, tagReplayField)
	var err error
	if t.Origin, err = decodePercent(origin); err != nil {
		return Tag{}, err
	}
	return t, nil
}

// tagNeedsEscape reports the bytes escaped in tag fields: the tag's own
// separators, '%', the quote (so that the tag literal never contains one),
// and everything outside printable ASCII.
func tagNeedsEscape(c byte) bool {
	switch c {
	case ';', ',', '=', '%', '\'':
		return true
	}
	return c < 0x20 || c >= 0x7f
}

// pathNeedsEscape reports the bytes escaped in a broker id inside a
// PathHeader value: the separator '|', '%', and control characters.
func pathNeedsEscape(c byte) bool {
	return c == '|' || c == '%' || c < 0x20 || c == 0x7f
}

// encodePathID returns id as it appears between the bars of a PathHeader
// value. Ordinary ids (letters, digits, ':', '-', '.', '_', ...) are
// unchanged.
func encodePathID(id string) string {
	var b strings.Builder
	escapeBytes(&b, id, pathNeedsEscape)
	return b.String()
}

// escapeBytes writes s to b with every byte for which esc is true written
// as %XX (upper-case hex).
func escapeBytes(b *strings.Builder, s string, esc func(byte) bool) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if esc(c) {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
}

// decodePercent undoes escapeBytes. It accepts any %XX sequence; callers
// that need the canonical form compare the re-encoding.
func decodePercent(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("truncated escape in %q", s)
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("bad escape %q in %q", s[i:i+3], s)
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), nil
}

// FormatPath renders broker ids as a PathHeader value: "|A|B|". It returns
// "" for no ids. Ids are written verbatim except for '|', '%' and control
// characters, which are percent-escaped (%7C, %25, ...); Selector's hop
// filter uses the same encoding.
func FormatPath(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('|')
	for _, id := range ids {
		escapeBytes(&b, id, pathNeedsEscape)
		b.WriteByte('|')
	}
	return b.String()
}

// AppendPath returns the PathHeader value of a message that had value v
// (possibly "", or malformed) when it leaves the broker id. The result
// always contains "|id|" (encoded as by FormatPath), so the hop filter of
// Selector works even when v was malformed.
func AppendPath(v, id string) string {
	enc := encodePathID(id)
	switch {
	case v == "":
		return "|" + enc + "|"
	case strings.HasSuffix(v, "|"):
		return v + enc + "|"
	default:
		return v + "|" + enc + "|"
	}
}

// ParsePath parses a PathHeader value into broker ids; "" gives nil. It
// inverts FormatPath.
func ParsePath(v string) ([]string, error) {
	if v == "" {
		return nil, nil
	}
	if len(v) < 2 || v[0] != '|' || v[len(v)-1] != '|' {
		return nil, fmt.Errorf("parsing %s %q: want \"|ID|ID|\"", PathHeader, v)
	}
	parts := strings.Split(v[1:len(v)-1], "|")
	ids := make([]string, 0, len(parts))
	for _, p := range parts {
		id, err := decodePercent(p)
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", PathHeader, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// PathHolds reports whether the PathHeader value v lists broker id: whether
// the message has been on that broker before. It allocates only for an id
// that needs escaping.
func PathHolds(v, id string) bool {
	if v == "" || id == "" {
		return false
	}
	enc := id
	for i := 0; i < len(id); i++ {
		if pathNeedsEscape(id[i]) {
			enc = encodePathID(id)
			break
		}
	}
	for i := 0; ; {
		j := strings.Index(v[i:], enc)
		if j < 0 {
			return false
		}
		j += i
		if j > 0 && v[j-1] == '|' && j+len(enc) < len(v) && v[j+len(enc)] == '|' {
			return true
		}
		i = j + 1
	}
}
