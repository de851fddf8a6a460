// Package selector checks the syntax of JMS message selectors, the SQL-92
// subset ActiveMQ's SelectorParser accepts, so that a bad selector in a
// configuration is refused when it is loaded rather than by the broker when a
// bridge subscribes with it.
package selector

import (
	"fmt"
	"strings"
)

// Check returns nil when s is a selector ActiveMQ would parse, else an error
// naming the first problem and its position (1-based, in bytes).
func Check(s string) error {
	if strings.TrimSpace(s) == "" {
		return fmt.Errorf("empty selector")
	}
	p := &parser{src: s}
	if err := p.lex(); err != nil {
		return err
	}
	if err := p.or(); err != nil {
		return err
	}
	if t := p.peek(); t.kind != eof {
		return p.errorf(t, "unexpected %s", t)
	}
	return nil
}

type kind int

const (
	eof kind = iota
	ident
	keyword
	str
	number
	op
)

type token struct {
	kind kind
	text string // keywords upper-cased
	pos  int    // 1-based
}

func (t token) String() string {
	switch t.kind {
	case eof:
		return "end of selector"
	case str:
		return "string " + t.text
	}
	return fmt.Sprintf("%q", t.text)
}

var keywords = map[string]bool{
	"AND": true, "OR": true, "NOT": true, "BETWEEN": true, "LIKE": true, "ESCAPE": true, "IN": true,
	"IS": true, "NULL": true, "TRUE": true, "FALSE": true, "XPATH": true, "XQUERY": true,
}

type parser struct {
	src  string
	toks []token
	i    int
}

func (p *parser) errorf(t token, format string, args ...any) error {
	return fmt.Errorf("selector %q: at %d: %s", p.src, t.pos, fmt.Sprintf(format, args...))
}

func isIdentStart(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdentPart(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' || c == '.' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// lex splits the selector into tokens.
func (p *parser) lex() error {
	s := p.src
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
		case c == '\'':
			j := i + 1
			for ; j < len(s); j++ {
				if s[j] == '\'' {
					if j+1 < len(s) && s[j+1] == '\'' {
						j++
						continue
					}
					break
				}
			}
			if j >= len(s) {
				return fmt.Errorf("selector %q: at %d: string has no closing quote", s, i+1)
			}
			p.toks = append(p.toks, token{str, s[i : j+1], i + 1})
			i = j + 1
		case isIdentStart(c):
			j := i + 1
			for j < len(s) && isIdentPart(s[j]) {
				j++
			}
			w := s[i:j]
			if up := strings.ToUpper(w); keywords[up] {
				p.toks = append(p.toks, token{keyword, up, i + 1})
			} else {
				p.toks = append(p.toks, token{ident, w, i + 1})
			}
			i = j
		case isDigit(c) || c == '.' && i+1 < len(s) && isDigit(s[i+1]):
			j := lexNumber(s, i)
			if j < len(s) && isIdentStart(s[j]) {
				return fmt.Errorf("selector %q: at %d: bad number %q", s, i+1, s[i:j+1])
			}
			p.toks = append(p.toks, token{number, s[i:j], i + 1})
			i = j
		default:
			o := ""
			for _, cand := range []string{"<>", "<=", ">=", "=", "<", ">", "(", ")", ",", "+", "-", "*", "/", "%"} {
				if strings.HasPrefix(s[i:], cand) {
					o = cand
					break
				}
			}
			if o == "" {
				return fmt.Errorf("selector %q: at %d: unexpected character %q", s, i+1, c)
			}
			p.toks = append(p.toks, token{op, o, i + 1})
			i += len(o)
		}
	}
	p.toks = append(p.toks, token{eof, "", len(s) + 1})
	return nil
}

// lexNumber returns the end of the numeric literal at s[i]: decimal, octal
// or hex integers with an optional L, and floating-point numbers with an
// optional exponent and d or f.
func lexNumber(s string, i int) int {
	j := i
	if strings.HasPrefix(s[j:], "0x") || strings.HasPrefix(s[j:], "0X") {
		j += 2
		for j < len(s) && strings.IndexByte("0123456789abcdefABCDEF", s[j]) >= 0 {
			j++
		}
	} else {
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		if j < len(s) && s[j] == '.' {
			j++
			for j < len(s) && isDigit(s[j]) {
				j++
			}
		}
		if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
			k := j + 1
			if k < len(s) && (s[k] == '+' || s[k] == '-') {
				k++
			}
			if k < len(s) && isDigit(s[k]) {
				for j = k; j < len(s) && isDigit(s[j]); j++ {
				}
			}
		}
	}
	if j < len(s) && strings.IndexByte("lLdDfF", s[j]) >= 0 {
		j++
	}
	return j
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != eof {
		p.i++
	}
	return t
}

// accept consumes the next token when it is the keyword or operator text.
func (p *parser) accept(text string) bool {
	if t := p.peek(); (t.kind == keyword || t.kind == op) && t.text == text {
		p.i++
		return true
	}
	return false
}

func (p *parser) expect(text string) error {
	if !p.accept(text) {
		t := p.peek()
		return p.errorf(t, "want %q, found %s", text, t)
	}
	return nil
}

func (p *parser) or() error {
	if err := p.and(); err != nil {
		return err
	}
	for p.accept("OR") {
		if err := p.and(); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) and() error {
	if err := p.equality(); err != nil {
		return err
	}
	for p.accept("AND") {
		if err := p.equality(); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) equality() error {
	if err := p.comparison(); err != nil {
		return err
	}
	for {
		switch {
		case p.accept("="), p.accept("<>"):
			if err := p.comparison(); err != nil {
				return err
			}
		case p.accept("IS"):
			p.accept("NOT")
			if err := p.expect("NULL"); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

func (p *parser) comparison() error {
	if err := p.additive(); err != nil {
		return err
	}
	for {
		switch {
		case p.accept(">"), p.accept(">="), p.accept("<"), p.accept("<="):
			if err := p.additive(); err != nil {
				return err
			}
			continue
		}
		// NOT belongs here only before LIKE, BETWEEN or IN.
		if t := p.peek(); t.kind == keyword && t.text == "NOT" {
			if n := p.toks[p.i+1]; n.kind == keyword && (n.text == "LIKE" || n.text == "BETWEEN" || n.text == "IN") {
				p.i++
			}
		}
		switch {
		case p.accept("LIKE"):
			if err := p.string(); err != nil {
				return err
			}
			if p.accept("ESCAPE") {
				if err := p.string(); err != nil {
					return err
				}
			}
		case p.accept("BETWEEN"):
			if err := p.additive(); err != nil {
				return err
			}
			if err := p.expect("AND"); err != nil {
				return err
			}
			if err := p.additive(); err != nil {
				return err
			}
		case p.accept("IN"):
			if err := p.expect("("); err != nil {
				return err
			}
			for {
				if err := p.string(); err != nil {
					return err
				}
				if !p.accept(",") {
					break
				}
			}
			if err := p.expect(")"); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

func (p *parser) string() error {
	if t := p.next(); t.kind != str {
		return p.errorf(t, "want a string, found %s", t)
	}
	return nil
}

func (p *parser) additive() error {
	if err := p.multiplicative(); err != nil {
		return err
	}
	for p.accept("+") || p.accept("-") {
		if err := p.multiplicative(); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) multiplicative() error {
	if err := p.unary(); err != nil {
		return err
	}
	for p.accept("*") || p.accept("/") || p.accept("%") {
		if err := p.unary(); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) unary() error {
	switch {
	case p.accept("+"), p.accept("-"), p.accept("NOT"):
		return p.unary()
	case p.accept("XPATH"), p.accept("XQUERY"):
		return p.string()
	}
	t := p.next()
	switch {
	case t.kind == ident, t.kind == str, t.kind == number:
		return nil
	case t.kind == keyword && (t.text == "TRUE" || t.text == "FALSE" || t.text == "NULL"):
		return nil
	case t.kind == op && t.text == "(":
		if err := p.or(); err != nil {
			return err
		}
		return p.expect(")")
	}
	if t.kind == eof {
		return p.errorf(t, "selector ends where a value is wanted")
	}
	return p.errorf(t, "want a value, found %s", t)
}
