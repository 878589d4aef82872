package portcullis_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/portcullis/portcullis"
)

func TestDecodeCall(t *testing.T) {
	risk := 40.0
	for _, tc := range []struct {
		name    string
		in      string
		want    portcullis.Call
		wantErr string
	}{
		{name: "minimal", in: `{"tool":"list_elements"}`, want: portcullis.Call{Tool: "list_elements"}},
		{
			name: "full contract example",
			in: `{"tool": "delete_element", "args": {"name": "x", "n": 1.50}, "session": "s1", "agent": "deploy-bot",
 "elementType": "persona", "activeElements": ["Security Persona"], "userPresent": true,
 "grants": [{"tool": "create_element", "kind": "session", "elementType": "persona"}],
 "run": {"id": "r1", "step": 3, "previousOutcome": "success", "riskScore": 40,
         "nextActionHint": "delete user data", "trigger": "nightly cleanup"},
 "conversation": [{"role": "user", "content": "..."}]}`,
			want: portcullis.Call{
				Tool: "delete_element", Args: map[string]any{"name": "x", "n": json.Number("1.50")},
				Session: "s1", Agent: "deploy-bot", ElementType: "persona",
				ActiveElements: []string{"Security Persona"}, UserPresent: true,
				Grants: []portcullis.Grant{{Tool: "create_element", Kind: portcullis.GrantSession, ElementType: "persona"}},
				Run: &portcullis.Run{ID: "r1", Step: 3, PreviousOutcome: portcullis.StepSuccess, RiskScore: &risk,
					NextActionHint: "delete user data", Trigger: "nightly cleanup"},
				Conversation: []portcullis.Message{{Role: "user", Content: "..."}},
			},
		},
		{name: "empty activeElements is not absent", in: `{"tool":"x","activeElements":[]}`, want: portcullis.Call{Tool: "x", ActiveElements: []string{}}},
		{name: "missing tool", in: `{"args":{}}`, wantErr: `missing "tool"`},
		{name: "empty tool", in: `{"tool":""}`, wantErr: `missing "tool"`},
		{name: "empty input", in: ``, wantErr: "empty request"},
		{name: "not an object", in: `[1,2]`, wantErr: "want a request object"},
		{name: "malformed", in: `{"tool": "x",}`, wantErr: "malformed JSON"},
		{name: "truncated", in: `{"tool": "x"`, wantErr: "truncated JSON"},
		{name: "unknown field", in: `{"tool":"x","activeElement":["a"]}`, wantErr: `unknown field "activeElement"`},
		{name: "trailing data", in: `{"tool":"x"} {"tool":"y"}`, wantErr: "unexpected data after"},
		{name: "args not an object", in: `{"tool":"x","args":[1]}`, wantErr: `field "args"`},
		{name: "tool not a string", in: `{"tool":5}`, wantErr: `field "tool": got JSON number, want a string`},
		{name: "bad grant kind", in: `{"tool":"x","grants":[{"tool":"x","kind":"forever"}]}`, wantErr: `unknown kind "forever"`},
		{name: "grant without tool", in: `{"tool":"x","grants":[{"kind":"session"}]}`, wantErr: "grants[0]: missing tool"},
		{name: "bad previous outcome", in: `{"tool":"x","run":{"id":"r","step":1,"previousOutcome":"meh"}}`, wantErr: `unknown outcome "meh"`},
		{name: "negative step", in: `{"tool":"x","run":{"id":"r","step":-1}}`, wantErr: "negative"},
		{name: "tool too long", in: `{"tool":"` + strings.Repeat("a", 501) + `"}`, wantErr: "limit of 500"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := portcullis.DecodeCall([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("DecodeCall(%s) error = %v; want one containing %q", tc.in, err, tc.wantErr)
				}
				if portcullis.ErrorCode(err) != portcullis.CodeInvalidRequest {
					t.Errorf("DecodeCall(%s) error code = %q; want INVALID_REQUEST", tc.in, portcullis.ErrorCode(err))
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeCall(%s) error = %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("DecodeCall(%s) mismatch (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestArgsDigest(t *testing.T) {
	digest := func(s string) string {
		t.Helper()
		c, err := portcullis.DecodeCall([]byte(`{"tool":"x","args":` + s + `}`))
		if err != nil {
			t.Fatal(err)
		}
		d, err := portcullis.ArgsDigest(c.Args)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if a, b := digest(`{"a":1,"b":"x"}`), digest(`{"b":"x","a":1}`); a != b {
		t.Errorf("digest depends on key order: %s != %s", a, b)
	}
	if a, b := digest(`{}`), digest(`null`); a != b {
		t.Errorf("empty and absent arguments differ: %s != %s", a, b)
	}
	for _, pair := range [][2]string{
		{`{"a":1}`, `{"a":2}`},
		{`{"a":1}`, `{"a":"1"}`},
		{`{"a":1}`, `{"a":1,"b":null}`},
		{`{"n":9007199254740993}`, `{"n":9007199254740992}`},
		{`{"a":{"b":[1,2]}}`, `{"a":{"b":[2,1]}}`},
	} {
		if digest(pair[0]) == digest(pair[1]) {
			t.Errorf("ArgsDigest(%s) == ArgsDigest(%s); want different", pair[0], pair[1])
		}
	}
	if d := digest(`{"a":1}`); !strings.HasPrefix(d, "sha256:") || len(d) != len("sha256:")+64 {
		t.Errorf("digest = %q; want sha256:<64 hex>", d)
	}
}

func TestLevelText(t *testing.T) {
	for l := portcullis.AutoApprove; l <= portcullis.Deny; l++ {
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		var back portcullis.Level
		if err := json.Unmarshal(b, &back); err != nil || back != l {
			t.Errorf("round trip of %s = %v, %v", l, back, err)
		}
	}
	if _, err := json.Marshal(portcullis.LevelUnset); err == nil {
		t.Error("marshaling the unset level succeeded; want an error")
	}
	if _, err := portcullis.ParseLevel("CONFIRM"); err == nil || !strings.Contains(err.Error(), "want AUTO_APPROVE, CONFIRM_SESSION, CONFIRM_SINGLE_USE or DENY") {
		t.Errorf("ParseLevel(CONFIRM) error = %v", err)
	}
	if !(portcullis.AutoApprove < portcullis.ConfirmSession && portcullis.ConfirmSession < portcullis.ConfirmSingleUse && portcullis.ConfirmSingleUse < portcullis.Deny) {
		t.Error("levels are not ordered by strictness")
	}
	if got := portcullis.ConfirmSingleUse.Stricter(portcullis.ConfirmSession); got != portcullis.ConfirmSingleUse {
		t.Errorf("Stricter = %s; want CONFIRM_SINGLE_USE", got)
	}
}

func TestEndpointDefaults(t *testing.T) {
	want := map[portcullis.Endpoint]portcullis.Level{
		portcullis.Read: portcullis.AutoApprove, portcullis.Create: portcullis.ConfirmSession,
		portcullis.Update: portcullis.ConfirmSingleUse, portcullis.Delete: portcullis.ConfirmSingleUse,
		portcullis.Execute: portcullis.ConfirmSingleUse, "": portcullis.ConfirmSingleUse, "BOGUS": portcullis.ConfirmSingleUse,
	}
	for e, l := range want {
		if got := e.DefaultLevel(); got != l {
			t.Errorf("Endpoint(%q).DefaultLevel() = %s; want %s", e, got, l)
		}
	}
}

// FuzzDecodeCall: the request decoder never panics, and what it accepts
// re-encodes to a request it accepts again with the same meaning.
func FuzzDecodeCall(f *testing.F) {
	for _, s := range []string{
		`{"tool":"list_elements"}`,
		`{"tool":"x","args":{"a":[1,{"b":null}],"n":1e400},"grants":[{"tool":"x","kind":"single","args":{"a":1}}]}`,
		`{"tool":"x","run":{"id":"r","step":2,"riskScore":1e308,"previousOutcome":"partial"}}`,
		`{"tool":"x","activeElements":[]}`,
		`{"tool":"\u0000"}`,
		`{}`, `[]`, `null`, `{"tool":"x"}{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := portcullis.DecodeCall(data)
		if err != nil {
			if portcullis.ErrorCode(err) != portcullis.CodeInvalidRequest {
				t.Fatalf("DecodeCall error without INVALID_REQUEST code: %v", err)
			}
			return
		}
		if c.Tool == "" {
			t.Fatal("DecodeCall accepted a request without a tool")
		}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("re-encode accepted call: %v", err)
		}
		c2, err := portcullis.DecodeCall(b)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", b, err)
		}
		d1, err1 := portcullis.ArgsDigest(c.Args)
		d2, err2 := portcullis.ArgsDigest(c2.Args)
		if err1 != nil || err2 != nil || d1 != d2 {
			t.Fatalf("argument digest changed across a round trip: %s %v / %s %v", d1, err1, d2, err2)
		}
	})
}

func TestRedactArgs(t *testing.T) {
	args := map[string]any{"to": "a@example.com", "token": "s3cret", "n": 1}
	got := portcullis.RedactArgs(args, []string{"token", "absent"})
	if got["token"] != portcullis.RedactedValue || got["to"] != "a@example.com" || got["n"] != 1 || len(got) != 3 {
		t.Fatalf("RedactArgs = %v", got)
	}
	if args["token"] != "s3cret" {
		t.Fatal("RedactArgs changed its argument")
	}
	if got := portcullis.RedactArgs(args, []string{"absent"}); got["token"] != "s3cret" || len(got) != 3 {
		t.Fatalf("RedactArgs with nothing to redact = %v", got)
	}
	if got := portcullis.RedactArgs(nil, []string{"token"}); got != nil {
		t.Fatalf("RedactArgs(nil) = %v", got)
	}
}

// TestArgsDigestForm checks each rule of the argument digest's canonical
// form as docs/STORAGE.md states it, so that a verifier in another
// language computes the same digest.
func TestArgsDigestForm(t *testing.T) {
	for _, tc := range []struct {
		name string
		args map[string]any
		form string
	}{
		{"no arguments", nil, `{}`},
		{"an empty object", map[string]any{}, `{}`},
		{"keys sorted by bytes, no whitespace", map[string]any{"b": true, "a": nil, "B": false, "é": "x", "aa": []any{}}, `{"B":false,"a":null,"aa":[],"b":true,"é":"x"}`},
		{"nested objects sorted too", map[string]any{"z": map[string]any{"y": 1, "x": 2}}, `{"z":{"x":2,"y":1}}`},
		{"numbers as written", map[string]any{"n": json.Number("1.50"), "e": json.Number("1e3"), "i": json.Number("-0")}, `{"e":1e3,"i":-0,"n":1.50}`},
		{"quote and backslash", map[string]any{"s": `a"b\c`}, `{"s":"a\"b\\c"}`},
		{"short escapes", map[string]any{"s": "\b\f\n\r\t"}, `{"s":"\b\f\n\r\t"}`},
		{"other control characters", map[string]any{"s": "\x00\x1f"}, `{"s":"\u0000\u001f"}`},
		{"HTML characters", map[string]any{"s": "<a>&"}, `{"s":"\u003ca\u003e\u0026"}`},
		{"line and paragraph separators", map[string]any{"s": "\u2028\u2029"}, `{"s":"\u2028\u2029"}`},
		{"invalid UTF-8, each byte", map[string]any{"s": "a\xff\xfeb"}, `{"s":"a\ufffd\ufffdb"}`},
		{"other characters as UTF-8", map[string]any{"s": "é€😀/"}, `{"s":"é€😀/"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := portcullis.ArgsDigest(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256([]byte(tc.form))
			if want := "sha256:" + hex.EncodeToString(sum[:]); got != want {
				t.Errorf("ArgsDigest = %s; want the digest of %s (%s)", got, tc.form, want)
			}
		})
	}
}
