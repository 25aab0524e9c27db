package ctrlhost

import (
	"encoding/json"
	"unicode/utf8"
)

// The request decoder's fast path. Parsing every request's objects with encoding/json was ~40%
// of the Go SDK's CPU time per reconcile (bench/sdk_dispatch): it scans every document twice
// (once to find the value's end, once to decode it, through a state function per byte) and
// copies every key and string. fastParseObject decodes in one pass and makes one copy of the
// document: keys, strings and numbers are substrings of it.
//
// It gives up (ok false) rather than decide anything encoding/json might decide differently, and
// ParseObject then runs encoding/json on the whole document: so a document it accepts yields the
// same value (map[string]any, []any, string, json.Number, bool, nil) as encoding/json with
// UseNumber, and every malformed document gets encoding/json's error. It gives up on anything
// that is not plain JSON: a syntax error, data after the object, nesting deeper than
// encoding/json's limit. A string with an escape or invalid UTF-8 is decoded by encoding/json on
// its own (the rest of the document stays on the fast path).
//
// The decoded value keeps the document's copy alive as long as any string in it is referenced.

// maxJSONDepth is encoding/json's nesting limit; deeper documents go to encoding/json, which
// reports the error.
const maxJSONDepth = 10000

type jsonParser struct {
	s     string // the document (one copy of the request's bytes)
	i     int    // next byte
	depth int
	// elems holds the elements of the arrays being read (nested ones after their parent's);
	// each array is copied out at its end into a slice of its exact length (one allocation
	// instead of one per doubling of append).
	elems []any
}

// fastParseObject is ParseObject's fast path: ok is false when encoding/json must decide.
func fastParseObject(data []byte) (obj Object, ok bool) {
	var scratch [32]any // array elements, on the stack unless a document has more
	p := jsonParser{s: string(data), elems: scratch[:0]}
	p.skipSpace()
	if p.i >= len(p.s) || p.s[p.i] != '{' {
		return nil, false
	}
	v, ok := p.value()
	if !ok {
		return nil, false
	}
	p.skipSpace()
	if p.i != len(p.s) {
		return nil, false // data after the object: encoding/json's Decoder decides
	}
	obj, ok = v.(map[string]any)
	return obj, ok
}

func (p *jsonParser) skipSpace() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value() (any, bool) {
	if p.i >= len(p.s) {
		return nil, false
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, ok := p.str()
		if !ok {
			return nil, false
		}
		return s, true
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	}
	return nil, false
}

func (p *jsonParser) literal(word string) bool {
	if len(p.s)-p.i < len(word) || p.s[p.i:p.i+len(word)] != word {
		return false
	}
	p.i += len(word)
	return true
}

func (p *jsonParser) object() (any, bool) {
	p.depth++
	if p.depth > maxJSONDepth {
		return nil, false
	}
	p.i++ // '{'
	m := make(map[string]any)
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		p.depth--
		return m, true
	}
	for {
		p.skipSpace()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return nil, false
		}
		key, ok := p.str()
		if !ok {
			return nil, false
		}
		p.skipSpace()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, false
		}
		p.i++
		p.skipSpace()
		v, ok := p.value()
		if !ok {
			return nil, false
		}
		m[key] = v // a repeated key: the last wins, as in encoding/json
		p.skipSpace()
		if p.i >= len(p.s) {
			return nil, false
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			p.depth--
			return m, true
		default:
			return nil, false
		}
	}
}

func (p *jsonParser) array() (any, bool) {
	p.depth++
	if p.depth > maxJSONDepth {
		return nil, false
	}
	p.i++ // '['
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		p.depth--
		return make([]any, 0), true // encoding/json answers [] with an empty slice, not nil
	}
	start := len(p.elems)
	for {
		p.skipSpace()
		v, ok := p.value()
		if !ok {
			return nil, false
		}
		p.elems = append(p.elems, v)
		p.skipSpace()
		if p.i >= len(p.s) {
			return nil, false
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			p.depth--
			a := make([]any, len(p.elems)-start)
			copy(a, p.elems[start:])
			for j := start; j < len(p.elems); j++ {
				p.elems[j] = nil // the scratch keeps no value alive
			}
			p.elems = p.elems[:start]
			return a, true
		default:
			return nil, false
		}
	}
}

// str reads the string starting at p.i (a '"'). A plain string (no escape, valid UTF-8) is a
// substring of the document; any other is unquoted by encoding/json.
func (p *jsonParser) str() (string, bool) {
	start := p.i
	p.i++
	plain, ascii := true, true
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			body := p.s[start+1 : p.i-1]
			if ascii || utf8.ValidString(body) {
				if plain {
					return body, true
				}
				if out, ok := unescapeSimple(body); ok {
					return out, true
				}
			}
			var out string
			if err := json.Unmarshal([]byte(p.s[start:p.i]), &out); err != nil {
				return "", false
			}
			return out, true
		case c == '\\':
			plain = false
			p.i += 2 // the escaped byte cannot end the string; a bad escape fails in Unmarshal
		case c < 0x20:
			return "", false // a control character: invalid JSON
		default:
			if c >= utf8.RuneSelf {
				ascii = false
			}
			p.i++
		}
	}
	return "", false
}

// unescapeSimple decodes the one-character escapes (\" \\ \/ \b \f \n \r \t) of a string body
// that holds valid UTF-8; false for \u escapes (surrogate pairs, invalid code points) and bad
// escapes, which encoding/json decodes or rejects.
func unescapeSimple(body string) (string, bool) {
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		if i >= len(body) {
			return "", false
		}
		switch body[i] {
		case '"', '\\', '/':
			out = append(out, body[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		default:
			return "", false
		}
	}
	return string(out), true
}

// number reads a JSON number (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?) as the
// json.Number of its text, as encoding/json's UseNumber does.
func (p *jsonParser) number() (any, bool) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	if p.i >= len(p.s) {
		return nil, false
	}
	if p.s[p.i] == '0' {
		p.i++
	} else if !p.digits() {
		return nil, false
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if !p.digits() {
			return nil, false
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if !p.digits() {
			return nil, false
		}
	}
	return json.Number(p.s[start:p.i]), true
}

// digits reads one or more decimal digits.
func (p *jsonParser) digits() bool {
	start := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	return p.i > start
}
