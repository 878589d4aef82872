package portcullis

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// eventGen fills events with random values by reflection, every exported
// field of every type an event holds: a field added to any of them is
// filled too, so an encoder that does not write it fails the comparison.
type eventGen struct {
	r *rand.Rand
	// extra is a string (a fuzzer's) to use often among the hostile ones.
	extra string
}

// hostileStrings are the strings whose encoding differs most between
// encoders: HTML characters, the JavaScript line separators, control
// characters, invalid UTF-8 (a lone byte, a surrogate, a truncated rune),
// quotes and backslashes.
var hostileStrings = []string{
	"", "plain", "<script>&amp;</script>", "\u2028", "\u2029", "a\u2028b\u2029c",
	"\xff", "\xfe\xff", "\xed\xa0\x80", "\xe2\x80", "\xf0\x9f\x98", "é中😀",
	"\x00", "\x01\x1f\x7f", "\b\f\n\r\t", `"\/`, "\\u2028", "\ufffd", "a\xffb\u2028<>&",
	`{"kind":"decision"}`, strings.Repeat("x", 300),
}

func (g *eventGen) str() string {
	switch g.r.IntN(4) {
	case 0:
		if g.extra != "" {
			return g.extra
		}
		fallthrough
	case 1:
		return hostileStrings[g.r.IntN(len(hostileStrings))]
	case 2:
		b := make([]byte, g.r.IntN(12))
		for i := range b {
			b[i] = byte(g.r.IntN(256))
		}
		return string(b)
	}
	var sb strings.Builder
	for range g.r.IntN(4) {
		sb.WriteString(hostileStrings[g.r.IntN(len(hostileStrings))])
		sb.WriteString(g.extra)
	}
	return sb.String()
}

// numbers are json.Number literals, valid and not.
var numbers = []string{
	"0", "-0", "1", "-1", "3.25", "1e9", "1E+9", "-2.5e-300", "123456789012345678901234567890",
	"1e999999", "0.000000000000000000001", "", "01", "1.", ".5", "+1", "1e", "1e+", "0x10", "NaN", " 1", "1 ", "--1",
}

var floats = []float64{
	0, math.Copysign(0, -1), 1, -1.5, 0.1, 1e20, 1e21, 1e-6, 9.99e-7, 1e-7, 123456789.125, math.MaxFloat64,
	-math.MaxFloat64, math.SmallestNonzeroFloat64, 1 << 53, 1<<53 + 1, 0.30000000000000004, 1e-9,
}

var ints = []int64{0, 1, -1, 42, math.MaxInt64, math.MinInt64, math.MaxInt32, 1_000_000, -999_999}

func (g *eventGen) float() float64 {
	switch n := g.r.IntN(100); {
	case n == 0:
		return math.NaN()
	case n == 1:
		return math.Inf(1 - 2*g.r.IntN(2))
	case n < 50:
		return floats[g.r.IntN(len(floats))]
	}
	return math.Float64frombits(g.r.Uint64())
}

func (g *eventGen) int() int64 {
	if g.r.IntN(2) == 0 {
		return ints[g.r.IntN(len(ints))]
	}
	return g.r.Int64() >> g.r.IntN(64)
}

func (g *eventGen) time() time.Time {
	if g.r.IntN(6) == 0 {
		return time.Time{}
	}
	sec := g.r.Int64N(300_000_000_000) - 62_200_000_000 // mostly the years 0 to 9999, a few outside
	if g.r.IntN(50) == 0 {
		sec = g.r.Int64()
	}
	t := time.Unix(sec, g.r.Int64N(1_000_000_000))
	switch g.r.IntN(4) {
	case 0:
		return t.UTC()
	case 1:
		return t.In(time.FixedZone("x", int(g.r.Int64N(48*3600))-24*3600))
	case 2:
		return t.In(time.FixedZone("y", (g.r.IntN(29)-14)*3600+g.r.IntN(4)*900))
	}
	return t.Round(time.Duration(g.r.Int64N(int64(time.Hour)) + 1)).UTC()
}

// foreignValue is an argument of a type a program may put in a call that
// no decoder produces.
type foreignValue struct {
	A string         `json:"a"`
	B []byte         `json:"b,omitempty"`
	C map[string]int `json:"c"`
	d int
}

// value is an argument value: what DecodeCall produces, Go's basic types,
// and types only a program would put there.
func (g *eventGen) value(depth int) any {
	n := g.r.IntN(24)
	if depth > 3 && n >= 14 {
		n = g.r.IntN(14)
	}
	switch n {
	case 0:
		return nil
	case 1, 2:
		return g.str()
	case 3, 4:
		return json.Number(numbers[g.r.IntN(len(numbers))])
	case 5:
		return g.r.IntN(2) == 0
	case 6:
		return g.float()
	case 7:
		return float32(g.float())
	case 8:
		return int(g.int())
	case 9:
		return g.int()
	case 10:
		return int32(g.int())
	case 11:
		return g.r.Uint64()
	case 12:
		return Level(g.r.IntN(6))
	case 13:
		return Amount(g.int())
	case 14, 15, 16:
		return g.object(depth + 1)
	case 17, 18:
		if g.r.IntN(5) == 0 {
			return []any(nil)
		}
		l := make([]any, g.r.IntN(4))
		for i := range l {
			l[i] = g.value(depth + 1)
		}
		return l
	case 19:
		if g.r.IntN(5) == 0 {
			return []string(nil)
		}
		return []string{g.str(), g.str()}
	case 20:
		return foreignValue{A: g.str(), B: []byte(g.str()), C: map[string]int{g.str(): 1, g.str(): 2}, d: 3}
	case 21:
		return json.RawMessage(`{"z": [1, 2], "a": "<b>"}`)
	case 22:
		return g.time()
	}
	return map[string]any(nil)
}

func (g *eventGen) object(depth int) map[string]any {
	switch g.r.IntN(5) {
	case 0:
		return nil
	case 1:
		return map[string]any{}
	}
	m := map[string]any{}
	for range 1 + g.r.IntN(5) {
		m[g.str()] = g.value(depth)
	}
	return m
}

var (
	timeType   = reflect.TypeFor[time.Time]()
	numberType = reflect.TypeFor[json.Number]()
	levelType  = reflect.TypeFor[Level]()
	objectType = reflect.TypeFor[map[string]any]()
)

// fill sets v, and everything it holds, to random values.
func (g *eventGen) fill(v reflect.Value, depth int) {
	switch t := v.Type(); {
	case t == timeType:
		v.Set(reflect.ValueOf(g.time()))
		return
	case t == numberType:
		v.SetString(numbers[g.r.IntN(len(numbers))])
		return
	case t == levelType:
		l := Level(1 + g.r.IntN(4))
		if g.r.IntN(60) == 0 {
			l = Level(g.r.IntN(2) * 5)
		}
		v.Set(reflect.ValueOf(l))
		return
	case t == objectType:
		v.Set(reflect.ValueOf(g.object(depth)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(g.str())
	case reflect.Bool:
		v.SetBool(g.r.IntN(2) == 0)
	case reflect.Int, reflect.Int64:
		if g.r.IntN(3) == 0 {
			v.SetInt(0)
		} else {
			v.SetInt(g.int())
		}
	case reflect.Float64:
		v.SetFloat(g.float())
	case reflect.Pointer:
		if g.r.IntN(3) == 0 {
			v.SetZero()
			return
		}
		p := reflect.New(v.Type().Elem())
		g.fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		switch g.r.IntN(4) {
		case 0:
			v.SetZero()
			return
		case 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			return
		}
		s := reflect.MakeSlice(v.Type(), 1+g.r.IntN(3), 3)
		for i := range s.Len() {
			g.fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Interface:
		if x := g.value(depth); x != nil {
			v.Set(reflect.ValueOf(x))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				g.fill(v.Field(i), depth+1)
			}
		}
	default:
		panic("eventGen: teach it to fill a " + v.Type().String())
	}
}

func (g *eventGen) event() *AuditEvent {
	ev := new(AuditEvent)
	g.fill(reflect.ValueOf(ev).Elem(), 0)
	return ev
}

// checkEncoding compares EncodeAuditBody with encoding/json on ev: both
// fail, or both write the same bytes. It returns whether they wrote any.
func checkEncoding(t *testing.T, ev *AuditEvent) (body []byte, ok bool) {
	t.Helper()
	want, werr := encodingJSONBody(ev)
	got, gerr := EncodeAuditBody(ev)
	switch {
	case (werr != nil) != (gerr != nil):
		t.Fatalf("EncodeAuditBody(%+v) = %s, %v; encoding/json: %s, %v", ev, got, gerr, want, werr)
	case werr == nil && !bytes.Equal(got, want):
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("EncodeAuditBody differs from encoding/json at byte %d:\n got %s\nwant %s", i, got, want)
	}
	return got, werr == nil
}

// EncodeAuditBody writes exactly what encoding/json writes for random
// events full of hostile values, and fails exactly when it fails; the
// body it returns is the caller's (a later encoding does not change it).
func TestEncodeAuditBodyMatchesEncodingJSON(t *testing.T) {
	g := eventGen{r: rand.New(rand.NewPCG(21, 2026))}
	encoded := 0
	var last *AuditEvent
	var lastBody []byte
	for range 3000 {
		ev := g.event()
		body, ok := checkEncoding(t, ev)
		if !ok {
			continue
		}
		encoded++
		if last != nil {
			if again, _ := encodingJSONBody(last); !bytes.Equal(again, lastBody) {
				t.Fatalf("a row's body changed when the next row was encoded:\n got %s\nwant %s", lastBody, again)
			}
		}
		last, lastBody = ev, body
	}
	// The generator makes some events that do not encode (NaN, a year
	// past 9999, an unset level); most must encode, or the comparison
	// proves little.
	if encoded < 1000 {
		t.Errorf("%d of 3000 random events encoded; want most", encoded)
	}
	for _, ev := range []*AuditEvent{fullEvent(), {}, {Request: &Call{}, Decision: &Decision{PermissionLevel: Deny}}} {
		checkEncoding(t, ev)
	}
}

// Arguments nested deeper than the encoder goes itself encode as
// encoding/json encodes them, and a map that holds itself is an error,
// not endless recursion.
func TestEncodeAuditBodyDeepArguments(t *testing.T) {
	deep := map[string]any{"leaf": json.Number("1")}
	for i := range 3 * maxArgsDepth {
		if i%2 == 0 {
			deep = map[string]any{"m": deep, "s": "<&>"}
		} else {
			deep = map[string]any{"l": []any{deep, nil}}
		}
	}
	if _, ok := checkEncoding(t, &AuditEvent{Request: &Call{Args: deep}}); !ok {
		t.Fatal("deeply nested arguments did not encode")
	}
	cycle := map[string]any{}
	cycle["self"] = []any{cycle}
	if body, err := EncodeAuditBody(&AuditEvent{Request: &Call{Args: cycle}}); err == nil {
		t.Fatalf("EncodeAuditBody of a map that holds itself = %.100s..., nil; want an error", body)
	}
}

// FuzzEncodeAuditBody holds EncodeAuditBody to encoding/json on events
// built from a seed, with the fuzzer's string among the hostile ones.
func FuzzEncodeAuditBody(f *testing.F) {
	for i, s := range hostileStrings {
		f.Add(uint64(i), s)
	}
	f.Fuzz(func(t *testing.T, seed uint64, s string) {
		g := eventGen{r: rand.New(rand.NewPCG(seed, uint64(len(s)))), extra: s}
		checkEncoding(t, g.event())
		ev := &AuditEvent{Kind: AuditKind(s), Session: s, Request: &Call{Tool: s, Args: map[string]any{s: s, "n": json.Number(s)}}}
		checkEncoding(t, ev)
	})
}
