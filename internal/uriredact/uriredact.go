// Package uriredact hides the credentials of broker URIs, however malformed,
// so that every transport's URI errors follow one rule.
package uriredact

import (
	"fmt"
	"strings"
)

// Redact hides the passcode of a URI-looking string however malformed it is:
// in the part from the start of the authority (after the first "://", or from
// the beginning when there is none before it) up to the last '@', everything
// after the first ':' becomes "***" (a part without ':' is a login, shown). A
// passcode always ends at an '@', so no part of it survives; an '@' in an option
// value is over-redacted, which is harmless.
func Redact(s string) string {
	at := strings.LastIndex(s, "@")
	if at < 0 {
		return s
	}
	start := 0
	if i := strings.Index(s, "://"); i >= 0 && i+3 <= at {
		start = i + 3
	}
	colon := strings.Index(s[start:at], ":")
	if colon < 0 {
		return s
	}
	return s[:start+colon] + ":***" + s[at:]
}

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
