package mcpgw

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"testing"
)

// uniqueKeysByTokens is uniqueKeys as encoding/json's tokenizer reads a
// value: the reference uniqueKeys is checked against.
func uniqueKeysByTokens(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	type level struct {
		keys    map[string]bool // nil for an array
		wantKey bool
	}
	var stack []level
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		top := len(stack) - 1
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				if top >= 0 && stack[top].keys != nil {
					stack[top].wantKey = true
				}
				l := level{}
				if d == '{' {
					l = level{keys: map[string]bool{}, wantKey: true}
				}
				stack = append(stack, l)
			default:
				stack = stack[:top]
			}
			continue
		}
		if top < 0 || stack[top].keys == nil {
			continue
		}
		if !stack[top].wantKey {
			stack[top].wantKey = true
			continue
		}
		k, _ := tok.(string)
		if stack[top].keys[k] {
			return fmt.Errorf("the key %q appears twice in one object", k)
		}
		stack[top].keys[k] = true
		stack[top].wantKey = false
	}
}

var dupSeeds = []string{
	`{}`, `[]`, `1`, `"x"`, `null`, `{"a":1}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`,
	`{"a":{"b":1,"b":2},"a":3}`, `{"a":[{"x":1},{"x":1,"x":2}]}`, `[{"a":1},{"a":1}]`,
	`{"\ud800":1,"\udbff":2}`, "{\"\xff\":1,\"\xfe\":2}", `{"a\"b":1,"a\u0022b":2}`,
	`{"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k18":18,"k1":19}`,
	` { "a" : [ 1 , 2 , { "b" : "c\\" } ] , "b" : true } `, `{"":1,"":2}`, `{"a":"}","b":"{"}`,
	`{"a":1e5,"b":-0.5,"c":[true,false,null]}`,
}

// uniqueKeys finds the duplicate keys, and names the first, as
// encoding/json's tokenizer does, in every valid JSON value.
func FuzzUniqueKeys(f *testing.F) {
	for _, s := range dupSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var v any
		if json.Unmarshal(raw, &v) != nil {
			return // uniqueKeys reads only what decodeArgs decoded
		}
		raw = bytes.TrimSpace(raw)
		got, want := uniqueKeys(raw), uniqueKeysByTokens(raw)
		if (got == nil) != (want == nil) || got != nil && got.Error() != want.Error() {
			t.Fatalf("uniqueKeys(%q) = %v; want %v", raw, got, want)
		}
	})
}
