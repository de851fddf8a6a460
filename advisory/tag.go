package advisory

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

// Headers that brokernet sets on every message it forwards.
const (
	// PathHeader names the header that lists, as "|ID1|ID2|", the ids of the
	// brokers the message has already left, oldest first (see FormatPath).
	PathHeader = "BrokernetPath"
	// HopsHeader names the header that holds the number of entries of
	// PathHeader in decimal.
	HopsHeader = "BrokernetHops"
)

// ConvertStringPrefix is the prefix ActiveMQ puts in front of every selector
// that arrives over STOMP, so that string-valued headers compare as numbers
// (SelectorParser CONVERT_STRING_EXPRESSIONS_PREFIX). Advisories show it.
const ConvertStringPrefix = "convert_string_expressions:"

// Fixed pieces of the generated selector.
const (
	pathClauseStart = "(BrokernetPath IS NULL OR BrokernetPath NOT LIKE '"
	pathClauseEnd   = `' ESCAPE '\')`
	hopsClauseStart = " AND (BrokernetHops IS NULL OR BrokernetHops < "
	tagClauseStart  = " AND 'brokernet' <> '"
	tagVersion      = "v1"
	tagPathField    = ";path="
	tagOriginField  = ";origin="
)

// Tag is the demand metadata a brokernet demand subscription carries in its
// selector, the counterpart of ActiveMQ's ConsumerInfo brokerPath and
// networkConsumerIds.
type Tag struct {
	// Path lists the ids of the brokers the demand came through, the original
	// consumer's broker first. It is never empty for a demand subscription;
	// an empty Path is encoded by omitting it and decodes as nil.
	Path []string
	// Origin is the id of the original consumer.
	Origin string
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
	if user != "" {
		b.WriteString("(")
		b.WriteString(user)
		b.WriteString(") AND ")
	}
	b.WriteString(pathClauseStart)
	b.WriteString(sqlString(likePattern(notVisited)))
	b.WriteString(pathClauseEnd)
	if maxHops >= 0 {
		b.WriteString(hopsClauseStart)
		b.WriteString(strconv.Itoa(maxHops))
		b.WriteString(")")
	}
	b.WriteString(tagClauseStart)
	b.WriteString(sqlString(tag.literal()))
	b.WriteString("'")
	return b.String()
}

// ParseSelector splits a selector seen in an advisory into the user selector
// and the tag. A leading ConvertStringPrefix is ignored, so the selector may
// be passed with or without it.
//
// It does not trust the user part: it recognises the generated suffix
// anchored at the end, then checks that Selector rebuilds the input exactly.
// So ParseSelector(Selector(u, id, n, tag)) returns (u, tag, true) for every
// u, even one that itself contains brokernet-looking text. When sel is not a
// brokernet selector, ok is false and user is sel unchanged.
func ParseSelector(sel string) (user string, tag Tag, ok bool) {
	user, tag, _, _, ok = parseSelector(sel)
	if !ok {
		return sel, Tag{}, false
	}
	return user, tag, true
}

// parseSelector is ParseSelector that also returns the hop filter's
// parameters.
func parseSelector(sel string) (user string, tag Tag, notVisited string, maxHops int, ok bool) {
	s := strings.TrimPrefix(sel, ConvertStringPrefix)
	// The LIKE pattern always starts with "%|". The sequence "'%" cannot occur
	// later in a generated selector: '%' in ids is escaped as "\%" and the tag
	// literal holds no quote, so the last occurrence is the real one.
	m := strings.LastIndex(s, pathClauseStart+"%|")
	if m < 0 {
		return "", Tag{}, "", 0, false
	}
	if m > 0 {
		head := s[:m]
		if len(head) < len("() AND ") || head[0] != '(' || !strings.HasSuffix(head, ") AND ") {
			return "", Tag{}, "", 0, false
		}
		user = head[1 : len(head)-len(") AND ")]
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
	rest, ok = strings.CutPrefix(rest, tagClauseStart)
	if !ok {
		return "", Tag{}, "", 0, false
	}
	lit, rest, ok := cutSQLString(rest)
	if !ok || rest != "" {
		return "", Tag{}, "", 0, false
	}
	tag, err := parseTagLiteral(lit)
	if err != nil {
		return "", Tag{}, "", 0, false
	}
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
// percent-escaped (see escapeTagField). The path field is omitted when the
// path is empty, so that a path holding one empty id stays distinct.
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
