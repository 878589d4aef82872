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
	e := auditEncoder{b: (*bp)[:0]}
	e.event(ev)
	var out []byte
	if e.err == nil {
		out = slices.Clone(e.b)
	}
	if cap(e.b) <= maxPooledAuditBuf {
		*bp = e.b[:0]
		auditBufs.Put(bp)
	}
	if e.err != nil {
		return nil, fmt.Errorf("encode audit event: %w", e.err)
	}
	return out, nil
}

// auditEncoder appends an event's JSON to b; the first error stops it.
type auditEncoder struct {
	b   []byte
	err error
}

func (e *auditEncoder) fail(format string, args ...any) {
	if e.err == nil {
		e.err = fmt.Errorf(format, args...)
	}
}

func (e *auditEncoder) raw(s string) { e.b = append(e.b, s...) }

// field writes `,"key":` (or `"key":` for the first field of an object).
func (e *auditEncoder) field(first *bool, key string) {
	if !*first {
		e.b = append(e.b, ',')
	}
	*first = false
	e.b = append(e.b, '"')
	e.b = append(e.b, key...)
	e.b = append(e.b, '"', ':')
}

func (e *auditEncoder) strField(first *bool, key, v string) {
	e.field(first, key)
	e.str(v)
}

// optStr writes a string field with omitempty.
func (e *auditEncoder) optStr(first *bool, key, v string) {
	if v != "" {
		e.strField(first, key, v)
	}
}

func (e *auditEncoder) boolField(first *bool, key string, v bool) {
	e.field(first, key)
	e.b = strconv.AppendBool(e.b, v)
}

func (e *auditEncoder) intField(first *bool, key string, v int64) {
	e.field(first, key)
	e.b = strconv.AppendInt(e.b, v, 10)
}

func (e *auditEncoder) event(ev *AuditEvent) {
	f := true
	e.b = append(e.b, '{')
	e.strField(&f, "kind", string(ev.Kind))
	e.field(&f, "time")
	e.time(ev.Time)
	e.optStr(&f, "decisionId", ev.DecisionID)
	e.optStr(&f, "session", ev.Session)
	e.optStr(&f, "agent", ev.Agent)
	e.optStr(&f, "tool", ev.Tool)
	e.optStr(&f, "outcome", string(ev.Outcome))
	if ev.Request != nil {
		e.field(&f, "request")
		e.call(ev.Request)
	}
	if ev.Decision != nil {
		e.field(&f, "decision")
		e.decision(ev.Decision)
	}
	e.optStr(&f, "policyHash", ev.PolicyHash)
	if ev.LatencyNS != 0 {
		e.intField(&f, "latencyNs", ev.LatencyNS)
	}
	if v := ev.Validator; v != nil {
		e.field(&f, "validator")
		e.validator(v)
	}
	if ev.UserPresent {
		e.boolField(&f, "userPresent", true)
	}
	e.optStr(&f, "actor", ev.Actor)
	e.optStr(&f, "detail", ev.Detail)
	e.b = append(e.b, '}')
}

func (e *auditEncoder) call(c *Call) {
	f := true
	e.b = append(e.b, '{')
	e.strField(&f, "tool", c.Tool)
	if len(c.Args) > 0 {
		e.field(&f, "args")
		e.object(c.Args)
	}
	e.optStr(&f, "session", c.Session)
	e.optStr(&f, "agent", c.Agent)
	e.optStr(&f, "elementType", c.ElementType)
	e.field(&f, "activeElements")
	e.strings(c.ActiveElements)
	if c.UserPresent {
		e.boolField(&f, "userPresent", true)
	}
	if len(c.Grants) > 0 {
		e.field(&f, "grants")
		e.b = append(e.b, '[')
		for i := range c.Grants {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.grant(&c.Grants[i])
		}
		e.b = append(e.b, ']')
	}
	if r := c.Run; r != nil {
		e.field(&f, "run")
		e.run(r)
	}
	if len(c.Conversation) > 0 {
		e.field(&f, "conversation")
		e.b = append(e.b, '[')
		for i, m := range c.Conversation {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			mf := true
			e.b = append(e.b, '{')
			e.strField(&mf, "role", m.Role)
			e.strField(&mf, "content", m.Content)
			e.b = append(e.b, '}')
		}
		e.b = append(e.b, ']')
	}
	e.optStr(&f, "contextSource", string(c.ContextSource))
	if cl := c.Client; cl != nil {
		e.field(&f, "client")
		cf := true
		e.b = append(e.b, '{')
		e.optStr(&cf, "session", cl.Session)
		e.optStr(&cf, "toolUseId", cl.ToolUseID)
		e.b = append(e.b, '}')
	}
	e.optStr(&f, "workdir", c.Workdir)
	e.b = append(e.b, '}')
}

func (e *auditEncoder) grant(g *Grant) {
	f := true
	e.b = append(e.b, '{')
	e.optStr(&f, "id", g.ID)
	e.strField(&f, "kind", string(g.Kind))
	e.strField(&f, "tool", g.Tool)
	e.optStr(&f, "elementType", g.ElementType)
	e.optStr(&f, "session", g.Session)
	if len(g.Args) > 0 {
		e.field(&f, "args")
		e.object(g.Args)
	}
	e.optStr(&f, "argsDigest", g.ArgsDigest)
	e.optStr(&f, "grantedBy", g.GrantedBy)
	if !g.CreatedAt.IsZero() {
		e.field(&f, "createdAt")
		e.time(g.CreatedAt)
	}
	if !g.ExpiresAt.IsZero() {
		e.field(&f, "expiresAt")
		e.time(g.ExpiresAt)
	}
	e.b = append(e.b, '}')
}

func (e *auditEncoder) run(r *Run) {
	f := true
	e.b = append(e.b, '{')
	e.strField(&f, "id", r.ID)
	e.intField(&f, "step", int64(r.Step))
	e.optStr(&f, "previousOutcome", string(r.PreviousOutcome))
	if r.RiskScore != nil {
		e.field(&f, "riskScore")
		e.float(*r.RiskScore, 64)
	}
	e.optStr(&f, "nextActionHint", r.NextActionHint)
	e.optStr(&f, "trigger", r.Trigger)
	e.b = append(e.b, '}')
}

// decision writes every contract field, with empty lists as [] (as
// Decision.MarshalJSON does).
func (e *auditEncoder) decision(d *Decision) {
	f := true
	e.b = append(e.b, '{')
	e.strField(&f, "decisionId", d.DecisionID)
	e.strField(&f, "outcome", string(d.Outcome))
	e.field(&f, "permissionLevel")
	e.level(d.PermissionLevel)
	e.strField(&f, "code", string(d.Code))
	e.strField(&f, "reason", d.Reason)
	e.strField(&f, "source", string(d.Source))
	e.strField(&f, "sourceElement", d.SourceElement)
	e.strField(&f, "matchedPolicy", d.MatchedPolicy)
	e.field(&f, "conflictingElements")
	e.b = append(e.b, '[')
	for i, c := range d.ConflictingElements {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		cf := true
		e.b = append(e.b, '{')
		e.strField(&cf, "name", c.Name)
		e.field(&cf, "wantedLevel")
		e.level(c.WantedLevel)
		e.b = append(e.b, '}')
	}
	e.b = append(e.b, ']')
	e.strField(&f, "challengeId", d.ChallengeID)
	e.strField(&f, "whatWouldAuthorize", d.WhatWouldAuthorize)
	e.boolField(&f, "failClosed", d.FailClosed)
	e.field(&f, "trace")
	e.b = append(e.b, '[')
	for i := range d.Trace {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.traceEntry(&d.Trace[i])
	}
	e.b = append(e.b, ']')
	e.optStr(&f, "tool", d.Tool)
	e.optStr(&f, "endpoint", string(d.Endpoint))
	e.optStr(&f, "risk", string(d.Risk))
	if s := d.Shadow; s != nil {
		e.field(&f, "shadow")
		sf := true
		e.b = append(e.b, '{')
		e.strField(&sf, "outcome", string(s.Outcome))
		e.field(&sf, "permissionLevel")
		e.level(s.PermissionLevel)
		e.strField(&sf, "code", string(s.Code))
		e.strField(&sf, "source", string(s.Source))
		e.optStr(&sf, "sourceElement", s.SourceElement)
		e.strField(&sf, "reason", s.Reason)
		e.b = append(e.b, '}')
	}
	if bs := d.Budget; bs != nil {
		e.field(&f, "budget")
		bf := true
		e.b = append(e.b, '{')
		e.strField(&bf, "name", bs.Name)
		e.strField(&bf, "allows", bs.Allows)
		e.field(&bf, "used")
		e.amount(bs.Used)
		e.field(&bf, "limit")
		e.amount(bs.Limit)
		e.field(&bf, "cost")
		e.amount(bs.Cost)
		e.field(&bf, "reopensAt")
		e.time(bs.ReopensAt)
		e.b = append(e.b, '}')
	}
	e.b = append(e.b, '}')
}

func (e *auditEncoder) traceEntry(t *TraceEntry) {
	f := true
	e.b = append(e.b, '{')
	e.strField(&f, "stage", t.Stage)
	e.strField(&f, "result", t.Result)
	if t.Level != LevelUnset {
		e.field(&f, "level")
		e.level(t.Level)
	}
	if t.Decided {
		e.boolField(&f, "decided", true)
	}
	if len(t.Facts) > 0 {
		e.field(&f, "facts")
		e.b = append(e.b, '[')
		for i, fact := range t.Facts {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.str(string(fact))
		}
		e.b = append(e.b, ']')
	}
	e.optStr(&f, "upstream", t.Upstream)
	if t.Step != 0 {
		e.intField(&f, "step", int64(t.Step))
	}
	e.b = append(e.b, '}')
}

func (e *auditEncoder) validator(v *ValidatorRecord) {
	f := true
	e.b = append(e.b, '{')
	e.strField(&f, "provider", v.Provider)
	e.strField(&f, "model", v.Model)
	e.strField(&f, "promptHash", v.PromptHash)
	e.strField(&f, "verdict", v.Verdict)
	e.field(&f, "confidence")
	e.float(v.Confidence, 64)
	e.intField(&f, "latencyNs", v.LatencyNS)
	if v.Cached {
		e.boolField(&f, "cached", true)
	}
	if v.FailClosed {
		e.boolField(&f, "failClosed", true)
	}
	if v.OverBudget {
		e.boolField(&f, "overBudget", true)
	}
	e.b = append(e.b, '}')
}

// level writes a level's name; a level that is not one of the four is an
// error, as Level.MarshalText says.
func (e *auditEncoder) level(l Level) {
	if !l.Valid() {
		e.fail("invalid permission level %d", uint8(l))
		return
	}
	e.b = append(e.b, '"')
	e.b = append(e.b, levelNames[l]...)
	e.b = append(e.b, '"')
}

// amount writes an amount as Amount.MarshalJSON does.
func (e *auditEncoder) amount(a Amount) {
	s := a.String()
	if !validJSONNumber(s) {
		e.fail("amount %s is not a JSON number", s)
		return
	}
	e.b = append(e.b, s...)
}

// time writes t as time.Time.MarshalJSON does: RFC 3339 with the
// nanoseconds, an error for a year outside 0–9999.
func (e *auditEncoder) time(t time.Time) {
	e.b = append(e.b, '"')
	b, err := t.AppendText(e.b)
	if err != nil {
		e.fail("%w", err)
		return
	}
	e.b = append(b, '"')
}

// float writes f as encoding/json does: like ES6, without exponents
// between 1e-6 and 1e21; NaN and the infinities are errors.
func (e *auditEncoder) float(f float64, bits int) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		e.fail("unsupported value: %s", strconv.FormatFloat(f, 'g', -1, bits))
		return
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b := strconv.AppendFloat(e.b, f, format, -1, bits)
	if format == 'e' {
		// e-09 as e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	e.b = b
}

func (e *auditEncoder) strings(ss []string) {
	if ss == nil {
		e.raw("null")
		return
	}
	e.b = append(e.b, '[')
	for i, s := range ss {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.str(s)
	}
	e.b = append(e.b, ']')
}

// object writes a map with its keys sorted, as encoding/json does.
func (e *auditEncoder) object(m map[string]any) {
	if m == nil {
		e.raw("null")
		return
	}
	var small [16]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	e.b = append(e.b, '{')
	for i, k := range keys {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.str(k)
		e.b = append(e.b, ':')
		e.value(m[k])
		if e.err != nil {
			return
		}
	}
	e.b = append(e.b, '}')
}

// value writes an argument value: the types a decoded request holds
// (DecodeCall keeps numbers as json.Number) and Go's basic types here;
// any other type a program put in a call's arguments through
// encoding/json itself, as the canonical form is defined.
func (e *auditEncoder) value(v any) {
	switch x := v.(type) {
	case nil:
		e.raw("null")
	case string:
		e.str(x)
	case json.Number:
		s := string(x)
		if s == "" {
			s = "0"
		}
		if !validJSONNumber(s) {
			e.fail("invalid number literal %q", s)
			return
		}
		e.b = append(e.b, s...)
	case bool:
		e.b = strconv.AppendBool(e.b, x)
	case float64:
		e.float(x, 64)
	case float32:
		e.float(float64(x), 32)
	case int:
		e.b = strconv.AppendInt(e.b, int64(x), 10)
	case int64:
		e.b = strconv.AppendInt(e.b, x, 10)
	case int32:
		e.b = strconv.AppendInt(e.b, int64(x), 10)
	case uint64:
		e.b = strconv.AppendUint(e.b, x, 10)
	case map[string]any:
		e.object(x)
	case []any:
		if x == nil {
			e.raw("null")
			return
		}
		e.b = append(e.b, '[')
		for i, el := range x {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.value(el)
			if e.err != nil {
				return
			}
		}
		e.b = append(e.b, ']')
	case []string:
		e.strings(x)
	default:
		e.foreign(v)
	}
}

// foreign writes a value of a type the encoder does not know through
// encoding/json, which defines the canonical form.
func (e *auditEncoder) foreign(v any) {
	var w sliceWriter
	w.b = e.b
	enc := json.NewEncoder(&w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		e.fail("%w", err)
		return
	}
	// Encode ends the value with a newline.
	e.b = w.b[:len(w.b)-1]
}

type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// str writes s as a JSON string as encoding/json does with HTML escaping
// off: invalid UTF-8 as U+FFFD, U+2028 and U+2029 escaped.
func (e *auditEncoder) str(s string) {
	const hex = "0123456789abcdef"
	b := append(e.b, '"')
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
	e.b = append(b, '"')
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
