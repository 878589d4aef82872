package portcullis

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// The audit row's canonical form is what encoding/json writes for an
// AuditEvent with HTML escaping off and the decision's empty lists as []:
// existing chains were hashed over those bytes. This encoder writes the
// same bytes field by field, without reflection, since the row is encoded
// before every allowed call is forwarded. TestEncodeAuditBodyMatchesEncodingJSON
// and FuzzEncodeAuditBody hold it to encoding/json byte for byte.

// auditBufs holds encoding buffers between rows.
var auditBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// maxPooledAuditBuf bounds the buffers kept: a rare huge row does not
// pin its buffer.
const maxPooledAuditBuf = 64 << 10

// EncodeAuditBody returns an event's canonical JSON.
func EncodeAuditBody(ev *AuditEvent) ([]byte, error) {
	bp := auditBufs.Get().(*[]byte)
	var e auditEncoder
	b := e.event((*bp)[:0], ev)
	var out []byte
	if e.err == nil {
		out = slices.Clone(b)
	}
	if cap(b) <= maxPooledAuditBuf {
		*bp = b[:0]
		auditBufs.Put(bp)
	}
	if e.err != nil {
		return nil, fmt.Errorf("encode audit event: %w", e.err)
	}
	return out, nil
}

// auditEncoder appends an event's JSON to a buffer and keeps the first
// error, which discards the row. Its methods take the buffer and return it, as append does, so
// that writing a byte stores no pointer outside the stack.
type auditEncoder struct {
	err error
	// depth is how deep in nested arguments the encoder is.
	depth int
}

// maxArgsDepth is how deep the encoder nests argument objects and lists
// itself; deeper values go to encoding/json, whose cycle detection turns a
// map that holds itself into an error rather than endless recursion.
const maxArgsDepth = 100

func (e *auditEncoder) fail(format string, args ...any) {
	if e.err == nil {
		e.err = fmt.Errorf(format, args...)
	}
}

// key writes `,"key":`, or `"key":` for the first field of an object.
func key(b []byte, first *bool, k string) []byte {
	if !*first {
		b = append(b, ',')
	}
	*first = false
	b = append(b, '"')
	b = append(b, k...)
	return append(b, '"', ':')
}

func strField(b []byte, first *bool, k, v string) []byte {
	return appendString(key(b, first, k), v)
}

// optStr writes a string field with omitempty.
func optStr(b []byte, first *bool, k, v string) []byte {
	if v == "" {
		return b
	}
	return strField(b, first, k, v)
}

func boolField(b []byte, first *bool, k string, v bool) []byte {
	return strconv.AppendBool(key(b, first, k), v)
}

func intField(b []byte, first *bool, k string, v int64) []byte {
	return strconv.AppendInt(key(b, first, k), v, 10)
}

func (e *auditEncoder) event(b []byte, ev *AuditEvent) []byte {
	f := true
	b = append(b, '{')
	b = strField(b, &f, "kind", string(ev.Kind))
	b = e.time(key(b, &f, "time"), ev.Time)
	b = optStr(b, &f, "decisionId", ev.DecisionID)
	b = optStr(b, &f, "session", ev.Session)
	b = optStr(b, &f, "agent", ev.Agent)
	b = optStr(b, &f, "tool", ev.Tool)
	b = optStr(b, &f, "outcome", string(ev.Outcome))
	if ev.Request != nil {
		b = e.call(key(b, &f, "request"), ev.Request)
	}
	if ev.Decision != nil {
		b = e.decision(key(b, &f, "decision"), ev.Decision)
	}
	b = optStr(b, &f, "policyHash", ev.PolicyHash)
	if ev.LatencyNS != 0 {
		b = intField(b, &f, "latencyNs", ev.LatencyNS)
	}
	if v := ev.Validator; v != nil {
		b = e.validator(key(b, &f, "validator"), v)
	}
	if ev.UserPresent {
		b = boolField(b, &f, "userPresent", true)
	}
	b = optStr(b, &f, "actor", ev.Actor)
	b = optStr(b, &f, "detail", ev.Detail)
	return append(b, '}')
}

func (e *auditEncoder) call(b []byte, c *Call) []byte {
	f := true
	b = append(b, '{')
	b = strField(b, &f, "tool", c.Tool)
	if len(c.Args) > 0 {
		b = e.object(key(b, &f, "args"), c.Args)
	}
	b = optStr(b, &f, "session", c.Session)
	b = optStr(b, &f, "agent", c.Agent)
	b = optStr(b, &f, "elementType", c.ElementType)
	b = appendStrings(key(b, &f, "activeElements"), c.ActiveElements)
	if c.UserPresent {
		b = boolField(b, &f, "userPresent", true)
	}
	if len(c.Grants) > 0 {
		b = append(key(b, &f, "grants"), '[')
		for i := range c.Grants {
			if i > 0 {
				b = append(b, ',')
			}
			b = e.grant(b, &c.Grants[i])
		}
		b = append(b, ']')
	}
	if r := c.Run; r != nil {
		b = e.run(key(b, &f, "run"), r)
	}
	if len(c.Conversation) > 0 {
		b = append(key(b, &f, "conversation"), '[')
		for i, m := range c.Conversation {
			if i > 0 {
				b = append(b, ',')
			}
			mf := true
			b = append(b, '{')
			b = strField(b, &mf, "role", m.Role)
			b = strField(b, &mf, "content", m.Content)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = optStr(b, &f, "contextSource", string(c.ContextSource))
	if cl := c.Client; cl != nil {
		cf := true
		b = append(key(b, &f, "client"), '{')
		b = optStr(b, &cf, "session", cl.Session)
		b = optStr(b, &cf, "toolUseId", cl.ToolUseID)
		b = append(b, '}')
	}
	b = optStr(b, &f, "workdir", c.Workdir)
	return append(b, '}')
}

func (e *auditEncoder) grant(b []byte, g *Grant) []byte {
	f := true
	b = append(b, '{')
	b = optStr(b, &f, "id", g.ID)
	b = strField(b, &f, "kind", string(g.Kind))
	b = strField(b, &f, "tool", g.Tool)
	b = optStr(b, &f, "elementType", g.ElementType)
	b = optStr(b, &f, "session", g.Session)
	if len(g.Args) > 0 {
		b = e.object(key(b, &f, "args"), g.Args)
	}
	b = optStr(b, &f, "argsDigest", g.ArgsDigest)
	b = optStr(b, &f, "grantedBy", g.GrantedBy)
	if !g.CreatedAt.IsZero() {
		b = e.time(key(b, &f, "createdAt"), g.CreatedAt)
	}
	if !g.ExpiresAt.IsZero() {
		b = e.time(key(b, &f, "expiresAt"), g.ExpiresAt)
	}
	return append(b, '}')
}

func (e *auditEncoder) run(b []byte, r *Run) []byte {
	f := true
	b = append(b, '{')
	b = strField(b, &f, "id", r.ID)
	b = intField(b, &f, "step", int64(r.Step))
	b = optStr(b, &f, "previousOutcome", string(r.PreviousOutcome))
	if r.RiskScore != nil {
		b = e.float(key(b, &f, "riskScore"), *r.RiskScore, 64)
	}
	b = optStr(b, &f, "nextActionHint", r.NextActionHint)
	b = optStr(b, &f, "trigger", r.Trigger)
	return append(b, '}')
}

// decision writes every contract field, with empty lists as [] (as
// Decision.MarshalJSON does).
func (e *auditEncoder) decision(b []byte, d *Decision) []byte {
	f := true
	b = append(b, '{')
	b = strField(b, &f, "decisionId", d.DecisionID)
	b = strField(b, &f, "outcome", string(d.Outcome))
	b = e.level(key(b, &f, "permissionLevel"), d.PermissionLevel)
	b = strField(b, &f, "code", string(d.Code))
	b = strField(b, &f, "reason", d.Reason)
	b = strField(b, &f, "source", string(d.Source))
	b = strField(b, &f, "sourceElement", d.SourceElement)
	b = strField(b, &f, "matchedPolicy", d.MatchedPolicy)
	b = append(key(b, &f, "conflictingElements"), '[')
	for i, c := range d.ConflictingElements {
		if i > 0 {
			b = append(b, ',')
		}
		cf := true
		b = append(b, '{')
		b = strField(b, &cf, "name", c.Name)
		b = e.level(key(b, &cf, "wantedLevel"), c.WantedLevel)
		b = append(b, '}')
	}
	b = append(b, ']')
	b = strField(b, &f, "challengeId", d.ChallengeID)
	b = strField(b, &f, "whatWouldAuthorize", d.WhatWouldAuthorize)
	b = boolField(b, &f, "failClosed", d.FailClosed)
	b = append(key(b, &f, "trace"), '[')
	for i := range d.Trace {
		if i > 0 {
			b = append(b, ',')
		}
		b = e.traceEntry(b, &d.Trace[i])
	}
	b = append(b, ']')
	b = optStr(b, &f, "tool", d.Tool)
	b = optStr(b, &f, "endpoint", string(d.Endpoint))
	b = optStr(b, &f, "risk", string(d.Risk))
	if s := d.Shadow; s != nil {
		sf := true
		b = append(key(b, &f, "shadow"), '{')
		b = strField(b, &sf, "outcome", string(s.Outcome))
		b = e.level(key(b, &sf, "permissionLevel"), s.PermissionLevel)
		b = strField(b, &sf, "code", string(s.Code))
		b = strField(b, &sf, "source", string(s.Source))
		b = optStr(b, &sf, "sourceElement", s.SourceElement)
		b = strField(b, &sf, "reason", s.Reason)
		b = append(b, '}')
	}
	if bs := d.Budget; bs != nil {
		bf := true
		b = append(key(b, &f, "budget"), '{')
		b = strField(b, &bf, "name", bs.Name)
		b = strField(b, &bf, "allows", bs.Allows)
		b = e.amount(key(b, &bf, "used"), bs.Used)
		b = e.amount(key(b, &bf, "limit"), bs.Limit)
		b = e.amount(key(b, &bf, "cost"), bs.Cost)
		b = e.time(key(b, &bf, "reopensAt"), bs.ReopensAt)
		b = append(b, '}')
	}
	return append(b, '}')
}

func (e *auditEncoder) traceEntry(b []byte, t *TraceEntry) []byte {
	f := true
	b = append(b, '{')
	b = strField(b, &f, "stage", t.Stage)
	b = strField(b, &f, "result", t.Result)
	if t.Level != LevelUnset {
		b = e.level(key(b, &f, "level"), t.Level)
	}
	if t.Decided {
		b = boolField(b, &f, "decided", true)
	}
	if len(t.Facts) > 0 {
		b = append(key(b, &f, "facts"), '[')
		for i, fact := range t.Facts {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, string(fact))
		}
		b = append(b, ']')
	}
	b = optStr(b, &f, "upstream", t.Upstream)
	if t.Step != 0 {
		b = intField(b, &f, "step", int64(t.Step))
	}
	return append(b, '}')
}

func (e *auditEncoder) validator(b []byte, v *ValidatorRecord) []byte {
	f := true
	b = append(b, '{')
	b = strField(b, &f, "provider", v.Provider)
	b = strField(b, &f, "model", v.Model)
	b = strField(b, &f, "promptHash", v.PromptHash)
	b = strField(b, &f, "verdict", v.Verdict)
	b = e.float(key(b, &f, "confidence"), v.Confidence, 64)
	b = intField(b, &f, "latencyNs", v.LatencyNS)
	if v.Cached {
		b = boolField(b, &f, "cached", true)
	}
	if v.FailClosed {
		b = boolField(b, &f, "failClosed", true)
	}
	if v.OverBudget {
		b = boolField(b, &f, "overBudget", true)
	}
	return append(b, '}')
}

// level writes a level's name; a level that is not one of the four is an
// error, as Level.MarshalText says.
func (e *auditEncoder) level(b []byte, l Level) []byte {
	if !l.Valid() {
		e.fail("invalid permission level %d", uint8(l))
		return b
	}
	b = append(b, '"')
	b = append(b, levelNames[l]...)
	return append(b, '"')
}

// amount writes an amount as Amount.MarshalJSON does.
func (e *auditEncoder) amount(b []byte, a Amount) []byte {
	s := a.String()
	if !validJSONNumber(s) {
		e.fail("amount %s is not a JSON number", s)
		return b
	}
	return append(b, s...)
}

// time writes t as time.Time.MarshalJSON does: RFC 3339 with the
// nanoseconds, an error for a year outside 0–9999.
func (e *auditEncoder) time(b []byte, t time.Time) []byte {
	b = append(b, '"')
	out, err := t.AppendText(b)
	if err != nil {
		e.fail("%w", err)
		return b
	}
	return append(out, '"')
}

// float writes f as encoding/json does: like ES6, without exponents
// between 1e-6 and 1e21; NaN and the infinities are errors.
func (e *auditEncoder) float(b []byte, f float64, bits int) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		e.fail("unsupported value: %s", strconv.FormatFloat(f, 'g', -1, bits))
		return b
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if format == 'e' {
		// e-09 as e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

func appendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// object writes a map with its keys sorted, as encoding/json does.
func (e *auditEncoder) object(b []byte, m map[string]any) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	var small [16]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = e.value(append(b, ':'), m[k])
		if e.err != nil {
			return b
		}
	}
	return append(b, '}')
}

// value writes an argument value: the types a decoded request holds
// (DecodeCall keeps numbers as json.Number) and Go's basic types here;
// any other type a program put in a call's arguments through
// encoding/json itself, as the canonical form is defined.
func (e *auditEncoder) value(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...)
	case string:
		return appendString(b, x)
	case json.Number:
		s := string(x)
		if s == "" {
			s = "0"
		}
		if !validJSONNumber(s) {
			e.fail("invalid number literal %q", s)
			return b
		}
		return append(b, s...)
	case bool:
		return strconv.AppendBool(b, x)
	case float64:
		return e.float(b, x, 64)
	case float32:
		return e.float(b, float64(x), 32)
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case int32:
		return strconv.AppendInt(b, int64(x), 10)
	case uint64:
		return strconv.AppendUint(b, x, 10)
	case map[string]any:
		if e.depth >= maxArgsDepth {
			return e.foreign(b, x)
		}
		e.depth++
		b = e.object(b, x)
		e.depth--
		return b
	case []any:
		if e.depth >= maxArgsDepth {
			return e.foreign(b, x)
		}
		if x == nil {
			return append(b, "null"...)
		}
		e.depth++
		b = append(b, '[')
		for i, el := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = e.value(b, el)
			if e.err != nil {
				return b
			}
		}
		e.depth--
		return append(b, ']')
	case []string:
		return appendStrings(b, x)
	}
	return e.foreign(b, v)
}

// foreign writes a value of a type the encoder does not know through
// encoding/json, which defines the canonical form.
func (e *auditEncoder) foreign(b []byte, v any) []byte {
	w := sliceWriter{b: b}
	enc := json.NewEncoder(&w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		e.fail("%w", err)
		return b
	}
	// Encode ends the value with a newline.
	return w.b[:len(w.b)-1]
}

type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// appendString writes s as a JSON string as encoding/json does with HTML
// escaping off: invalid UTF-8 as U+FFFD, U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// validJSONNumber reports whether s is a JSON number, by the grammar
// encoding/json checks a json.Number against.
func validJSONNumber(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '-' {
		s = s[1:]
		if s == "" {
			return false
		}
	}
	switch {
	case s[0] == '0':
		s = s[1:]
	case '1' <= s[0] && s[0] <= '9':
		s = s[1:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	default:
		return false
	}
	if len(s) >= 2 && s[0] == '.' && '0' <= s[1] && s[1] <= '9' {
		s = s[2:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	if len(s) >= 2 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if s[0] == '+' || s[0] == '-' {
			s = s[1:]
			if s == "" {
				return false
			}
		}
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	return s == ""
}
