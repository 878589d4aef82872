package mcpgw

import (
	"bytes"
	"unicode/utf8"
)

// rpcLine is what scanLine reads of one JSON-RPC message: the few fields
// the fast path needs, as slices of the line (nothing is copied).
type rpcLine struct {
	method    []byte // the method's characters; nil with hasMethod false when absent
	hasMethod bool
	// id is the id's raw bytes: a string without escapes (with its
	// quotes) or an integer; nil when absent.
	id []byte
	// Of a tools/call: params.name's characters, and params.arguments
	// and params._meta as raw values (nil when absent).
	name, args, meta []byte
	hasName          bool
	// Of a response: result as a raw object, whether result.isError is
	// true, and the error as a raw value.
	result   []byte
	isError  bool
	errorRaw []byte
}

// maxScanDepth bounds the nesting scanLine follows; deeper lines are left
// to the SDK.
const maxScanDepth = 200

// maxScanKeys bounds the keys of an object scanLine reads (the message,
// its params, a result); an object with more is left to the SDK.
const maxScanKeys = 16

// scanLine reads one JSON-RPC message from a line without decoding it:
// jsonrpc, method and id; for a tools/call its params' name, arguments and
// _meta; for a response its result (and result.isError) or error. It
// returns false — the caller then leaves the line to the SDK — for
// anything two JSON readers could read differently, or that it does not
// expect: invalid JSON or UTF-8, trailing data, a duplicate key or a key
// with an escape in an object it reads, a key that differs from one it
// reads only in case or by a non-ASCII character, an escape in a string
// it returns, an id that is not a plain string or integer, params of a
// tools/call that are not an object with exactly name, arguments and
// _meta, a result that is not an object, an isError that is not a
// boolean.
func scanLine(line []byte, m *rpcLine) bool {
	*m = rpcLine{}
	if !utf8.Valid(line) {
		return false
	}
	s := scanner{b: line}
	s.ws()
	var hasJSONRPC, paramsObj bool
	ok := s.object(func(key []byte) bool {
		switch string(key) {
		case "jsonrpc":
			v, esc, ok := s.str()
			if !ok || esc || string(v) != "2.0" {
				return false
			}
			hasJSONRPC = true
		case "method":
			v, esc, ok := s.str()
			if !ok || esc {
				return false
			}
			m.method, m.hasMethod = v, true
		case "id":
			start := s.i
			if !s.id() {
				return false
			}
			m.id = s.b[start:s.i]
		case "params":
			start, depth := s.i, s.depth
			if s.callParams(m) {
				paramsObj = true
				return true
			}
			// Not the params of a tools/call the fast path takes: any
			// value, read again as such.
			s.i, s.depth = start, depth
			m.name, m.args, m.meta, m.hasName = nil, nil, nil, false
			return s.value()
		case "result":
			return s.result(m)
		case "error":
			start := s.i
			if !s.value() {
				return false
			}
			m.errorRaw = s.b[start:s.i]
		default:
			return false
		}
		return true
	}, "jsonrpc", "method", "id", "params", "result", "error")
	if !ok || !hasJSONRPC {
		return false
	}
	s.ws()
	if s.i != len(s.b) {
		return false // trailing data
	}
	if m.hasMethod && (m.result != nil || m.errorRaw != nil) || m.result != nil && m.errorRaw != nil {
		return false
	}
	if string(m.method) != "tools/call" || !paramsObj {
		m.name, m.args, m.meta, m.hasName = nil, nil, nil, false
	}
	return true
}

// toolsCall says whether the line is a tools/call request with params
// and a name: the only request the fast path takes.
func (m *rpcLine) toolsCall() bool {
	return string(m.method) == "tools/call" && m.id != nil && m.hasName
}

// callParams reads the params of a tools/call: an object with name (a
// string without escapes) and optionally arguments (any value) and _meta
// (an object), and no other key.
func (s *scanner) callParams(m *rpcLine) bool {
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	return s.object(func(key []byte) bool {
		start := s.i
		switch string(key) {
		case "name":
			v, esc, ok := s.str()
			if !ok || esc {
				return false
			}
			m.name, m.hasName = v, true
			return true
		case "arguments":
			if !s.value() {
				return false
			}
			m.args = s.b[start:s.i]
			return true
		case "_meta":
			if s.i >= len(s.b) || s.b[s.i] != '{' || !s.value() {
				return false
			}
			m.meta = s.b[start:s.i]
			return true
		}
		return false
	}, "name", "arguments", "_meta")
}

// result reads a response's result: an object whose isError, when
// present, is a boolean.
func (s *scanner) result(m *rpcLine) bool {
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	start := s.i
	s.depth++
	ok := s.object(func(key []byte) bool {
		if string(key) != "isError" {
			return s.value()
		}
		switch {
		case s.lit("true"):
			m.isError = true
		case s.lit("false"):
		default:
			return false
		}
		return true
	}, "isError", "_meta")
	s.depth--
	if ok {
		m.result = s.b[start:s.i]
	}
	return ok
}

// scanner walks JSON bytes, validating them as encoding/json would.
type scanner struct {
	b     []byte
	i     int
	depth int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) lit(word string) bool {
	if len(s.b)-s.i >= len(word) && string(s.b[s.i:s.i+len(word)]) == word {
		s.i += len(word)
		return true
	}
	return false
}

// object reads an object whose keys it reads: each key is checked (no
// escape, no duplicate, ASCII, not a case variant of one of known) and
// val reads its value at s.i (after white space).
func (s *scanner) object(val func(key []byte) bool, known ...string) bool {
	if !s.eat('{') {
		return false
	}
	var seen [maxScanKeys][]byte
	n := 0
	s.ws()
	if s.eat('}') {
		return true
	}
	for {
		s.ws()
		key, esc, ok := s.str()
		if !ok || esc || n == maxScanKeys {
			return false
		}
		for _, c := range key {
			if c >= utf8.RuneSelf {
				return false
			}
		}
		for _, k := range known {
			if len(k) == len(key) && string(key) != k && bytes.EqualFold(key, []byte(k)) {
				return false
			}
		}
		for _, prev := range seen[:n] {
			if bytes.Equal(prev, key) {
				return false
			}
		}
		seen[n] = key
		n++
		s.ws()
		if !s.eat(':') {
			return false
		}
		s.ws()
		if !val(key) {
			return false
		}
		s.ws()
		if s.eat(',') {
			continue
		}
		return s.eat('}')
	}
}

// id reads a plain id: a string without escapes, or an integer of at
// most 15 digits without a leading zero.
func (s *scanner) id() bool {
	if s.i < len(s.b) && s.b[s.i] == '"' {
		_, esc, ok := s.str()
		return ok && !esc
	}
	start := s.i
	s.eat('-')
	digits := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	n := s.i - digits
	switch {
	case n == 0 || n > 15:
		return false
	case s.b[digits] == '0' && (n > 1 || digits > start):
		return false // a leading zero, or -0
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case '.', 'e', 'E':
			return false
		}
	}
	return true
}

// str reads a string: its characters between the quotes, and whether
// they hold an escape.
func (s *scanner) str() (body []byte, esc, ok bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false, false
	}
	start := s.i + 1
	for i := start; i < len(s.b); i++ {
		c := s.b[i]
		switch {
		case c == '"':
			s.i = i + 1
			return s.b[start:i], esc, true
		case c == '\\':
			esc = true
			i++
			if i >= len(s.b) {
				return nil, false, false
			}
			switch s.b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(s.b) {
					return nil, false, false
				}
				for _, h := range s.b[i+1 : i+5] {
					if !isHex(h) {
						return nil, false, false
					}
				}
				i += 4
			default:
				return nil, false, false
			}
		case c < 0x20:
			return nil, false, false
		}
	}
	return nil, false, false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// value reads any JSON value.
func (s *scanner) value() bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{' || c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		s.depth++
		if s.depth > maxScanDepth {
			return false
		}
		s.i++
		s.ws()
		if s.eat(closer) {
			s.depth--
			return true
		}
		for {
			s.ws()
			if c == '{' {
				if _, _, ok := s.str(); !ok {
					return false
				}
				s.ws()
				if !s.eat(':') {
					return false
				}
				s.ws()
			}
			if !s.value() {
				return false
			}
			s.ws()
			if s.eat(',') {
				continue
			}
			if !s.eat(closer) {
				return false
			}
			s.depth--
			return true
		}
	case c == '"':
		_, _, ok := s.str()
		return ok
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return false
}

func (s *scanner) number() bool {
	s.eat('-')
	digits := func() int {
		start := s.i
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
		}
		return s.i - start
	}
	if s.i < len(s.b) && s.b[s.i] == '0' {
		s.i++
	} else if digits() == 0 {
		return false
	}
	if s.eat('.') && digits() == 0 {
		return false
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if !s.eat('+') {
			s.eat('-')
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}
