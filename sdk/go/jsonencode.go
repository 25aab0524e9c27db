package ctrlhost

import (
	"encoding/json"
	"sort"
	"strconv"
)

// The answer encoder's fast path. encoding/json's Marshal of the status and desired objects was
// ~10% of the Go SDK's CPU per reconcile (bench/sdk_dispatch): reflection per value and a deep
// stack that a fresh goroutine has to grow. marshalJSON writes the values a Result usually holds
// (maps with string keys, slices, strings, json.Number, bool, nil, integers) directly, and hands
// every other value (floats, structs, Marshalers, ...) to json.Marshal, whose bytes for a value
// are the same whether it is alone or nested; on any error it calls json.Marshal on the whole
// value, so the output and the errors are exactly encoding/json's.

// maxEncodeDepth is where the fast path stops and encoding/json, which detects cycles, takes
// over.
const maxEncodeDepth = 1000

// marshalJSON is json.Marshal(v), faster for the common values.
func marshalJSON(v any) ([]byte, error) {
	if out, ok := appendJSON(make([]byte, 0, 128), v, 0); ok {
		return out, nil
	}
	return json.Marshal(v)
}

func appendJSON(out []byte, v any, depth int) ([]byte, bool) {
	if depth > maxEncodeDepth {
		return nil, false
	}
	switch x := v.(type) {
	case nil:
		return append(out, "null"...), true
	case string:
		return appendJSONString(out, x)
	case bool:
		return strconv.AppendBool(out, x), true
	case json.Number:
		if !validNumber(string(x)) {
			return nil, false
		}
		if x == "" {
			return append(out, '0'), true // encoding/json writes an empty Number as 0
		}
		return append(out, x...), true
	case int:
		return strconv.AppendInt(out, int64(x), 10), true
	case int64:
		return strconv.AppendInt(out, x, 10), true
	case int32:
		return strconv.AppendInt(out, int64(x), 10), true
	case map[string]any:
		if x == nil {
			return append(out, "null"...), true
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out = append(out, '{')
		var ok bool
		for i, k := range keys {
			if i > 0 {
				out = append(out, ',')
			}
			if out, ok = appendJSONString(out, k); !ok {
				return nil, false
			}
			out = append(out, ':')
			if out, ok = appendJSON(out, x[k], depth+1); !ok {
				return nil, false
			}
		}
		return append(out, '}'), true
	case []any:
		if x == nil {
			return append(out, "null"...), true
		}
		out = append(out, '[')
		var ok bool
		for i, e := range x {
			if i > 0 {
				out = append(out, ',')
			}
			if out, ok = appendJSON(out, e, depth+1); !ok {
				return nil, false
			}
		}
		return append(out, ']'), true
	case map[string]string:
		if x == nil {
			return append(out, "null"...), true
		}
		m := make(map[string]any, len(x))
		for k, s := range x {
			m[k] = s
		}
		return appendJSON(out, m, depth)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	return append(out, data...), true
}

// appendJSONString writes s quoted; a string needing any escape (or holding non-ASCII bytes) is
// written by encoding/json, which escapes <, >, &, U+2028/9 and invalid UTF-8 its own way.
func appendJSONString(out []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			data, err := json.Marshal(s)
			if err != nil {
				return nil, false
			}
			return append(out, data...), true
		}
	}
	out = append(out, '"')
	out = append(out, s...)
	return append(out, '"'), true
}

// validNumber reports whether s is a JSON number (or "", which encoding/json writes as 0).
func validNumber(s string) bool {
	if s == "" {
		return true
	}
	p := jsonParser{s: s}
	if _, ok := p.number(); !ok {
		return false
	}
	return p.i == len(s)
}
