// Package uriredact hides the credentials of broker URIs, however malformed,
// so that every transport's URI errors follow one rule.
package uriredact

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Redact hides the passcode of a URI-looking string however malformed it is.
// The credentials are the part from the start of the authority (after the
// first "://" that follows a well-formed scheme, or from the beginning) up to
// the last '@'. When the scheme is one brokernet reads and the part holds a
// ':', what follows that ':' becomes "***" and the login stays readable;
// otherwise the whole part becomes "***": in a string of unknown shape a
// "login" may as well be a passcode whose "user:" was read as the scheme
// ("xu://secret@h"). A passcode always ends at an '@', so no part of it
// survives; an '@' in an option value is over-redacted, which is harmless.
// Credentials inside an option value, percent-encoded as CheckUserinfo asks
// ("?management=http%3A%2F%2Fu%3Apw%40h"), are hidden the same way.
func Redact(s string) string {
	return redactOptions(redactAuthority(s))
}

// redactOptions applies redactAuthority to every option value of s whose
// unescaped form holds an '@'.
func redactOptions(s string) string {
	q := strings.IndexByte(s, '?')
	if q < 0 {
		return s
	}
	params := strings.Split(s[q+1:], "&")
	changed := false
	for i, p := range params {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		uv, err := url.QueryUnescape(v)
		if err != nil || !strings.Contains(uv, "@") {
			continue
		}
		params[i] = k + "=" + url.QueryEscape(redactAuthority(uv))
		changed = true
	}
	if !changed {
		return s
	}
	return s[:q+1] + strings.Join(params, "&")
}

// redactAuthority hides the credentials of s's authority (see Redact).
func redactAuthority(s string) string {
	at := strings.LastIndex(s, "@")
	if at < 0 {
		return s
	}
	start, known := 0, false
	if i := strings.Index(s, "://"); i >= 0 && i+3 <= at && validScheme.MatchString(s[:i]) {
		start, known = i+3, knownSchemes[strings.ToLower(s[:i])]
	}
	colon := strings.Index(s[start:at], ":")
	if colon < 0 || !known {
		return s[:start] + "***" + s[at:]
	}
	return s[:start+colon] + ":***" + s[at:]
}

// knownSchemes are the broker URI schemes brokernet parses (transport/endpoint).
var knownSchemes = map[string]bool{
	"stomp": true, "stomp+ssl": true, "stomp+tls": true, "stomps": true,
	"amqp": true, "amqps": true, "amqp+ssl": true, "amqp+tls": true,
	"tcp": true, "ssl": true,
}

// validScheme is RFC 3986's scheme syntax.
var validScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

// CheckUserinfo refuses a URI whose credentials hold an unencoded '/', '?' or
// '#': url.Parse ends the credentials at the first of them, so a passcode
// holding one would spill into the path or the options, whose values errors
// show. Refusing is safer than guessing. The error shows s through Redact.
func CheckUserinfo(s string) error {
	i := strings.Index(s, "://")
	if i < 0 {
		return nil
	}
	authority := i + 3
	if at := strings.LastIndex(s, "@"); at > authority {
		if strings.ContainsAny(s[authority:at], "/?#") {
			return fmt.Errorf("broker URI %q: ambiguous '@': percent-encode '/', '?' and '#' in a passcode (%%2F, %%3F, %%23) and '@' in an option (%%40)", Redact(s))
		}
	}
	return nil
}

// All hides whatever lies between "://" and the last "@" of each
// URI-looking part of s, where a passcode would be.
func All(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i+3])
		rest := s[i+3:]
		end := strings.IndexAny(rest, ",)/? \t")
		if end < 0 {
			end = len(rest)
		}
		if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
			b.WriteString("***@")
			rest = rest[at+1:]
		}
		s = rest
	}
}

// Shorten cuts s to a length that fits a message line.
func Shorten(s string) string {
	const max = 60
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
