package mcpgw

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

var scanSeeds = []string{
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_note","arguments":{"id":1},"_meta":{"claudecode/toolUseId":"t1"}}}`,
	`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"read_note"}}`,
	` { "params" : { "arguments" : [1, {"x": "\u00e9"}] , "name" : "n" } , "method" : "tools/call" , "id" : -12 , "jsonrpc" : "2.0" } `,
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a","name":"b"}}`,
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"Name":"a","name":"b"}}`,
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a\u0062"}}`,
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"n\u0061me":"a"}}`,
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":null}`,
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x"}} {}`,
	`{"jsonrpc":"2.0","id":3.0,"method":"tools/call","params":{"name":"x"}}`,
	`{"jsonrpc":"2.0","id":03,"method":"tools/call","params":{"name":"x"}}`,
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`,
	`{"jsonrpc":"2.0","id":"pcf-1","result":{"content":[{"type":"text","text":"hi"}],"isError":true}}`,
	`{"jsonrpc":"2.0","id":"pcf-1","result":{"content":[],"isError":false,"_meta":{"portcullis/decision":{}}}}`,
	`{"jsonrpc":"2.0","id":"pcf-1","result":{"IsError":true,"isError":false}}`,
	`{"jsonrpc":"2.0","id":"pcf-1","error":{"code":-32603,"message":"no"}}`,
	`{"jsonrpc":"2.0","id":"pcf-1","result":42}`,
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"\xff\"}}",
}

// FuzzScanLine checks the fast path's scanner against encoding/json and
// the SDK's JSON-RPC decoder: whatever it accepts, they accept too, and
// read the same fields from.
func FuzzScanLine(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var m rpcLine
		if !scanLine(line, &m) {
			return
		}
		var w struct {
			JSONRPC string          `json:"jsonrpc"`
			Method  *string         `json:"method"`
			ID      json.RawMessage `json:"id"`
			Params  json.RawMessage `json:"params"`
			Result  json.RawMessage `json:"result"`
			Error   json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(line, &w); err != nil {
			t.Fatalf("scanLine accepted %q; encoding/json: %v", line, err)
		}
		if w.JSONRPC != "2.0" {
			t.Fatalf("scanLine accepted %q with jsonrpc %q", line, w.JSONRPC)
		}
		if m.hasMethod != (w.Method != nil) || w.Method != nil && string(m.method) != *w.Method {
			t.Fatalf("scanLine(%q).method = %q (%v); encoding/json: %v", line, m.method, m.hasMethod, w.Method)
		}
		if !bytes.Equal(m.id, w.ID) || !bytes.Equal(m.result, w.Result) || !bytes.Equal(m.errorRaw, w.Error) {
			t.Fatalf("scanLine(%q): id %q result %q error %q; encoding/json: %q %q %q", line, m.id, m.result, m.errorRaw, w.ID, w.Result, w.Error)
		}
		if m.result != nil {
			var r struct {
				IsError bool `json:"isError"`
			}
			if err := json.Unmarshal(w.Result, &r); err != nil || r.IsError != m.isError {
				t.Fatalf("scanLine(%q).isError = %v; encoding/json: %v (%v)", line, m.isError, r.IsError, err)
			}
		}
		if m.toolsCall() {
			var p struct {
				Name      *string         `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
				Meta      json.RawMessage `json:"_meta"`
			}
			if err := json.Unmarshal(w.Params, &p); err != nil || p.Name == nil {
				t.Fatalf("scanLine(%q) read a tools/call; encoding/json reads its params as %v (%v)", line, p.Name, err)
			}
			if string(m.name) != *p.Name || !bytes.Equal(m.args, p.Arguments) || !bytes.Equal(m.meta, p.Meta) {
				t.Fatalf("scanLine(%q): name %q arguments %q _meta %q; encoding/json: %q %q %q", line, m.name, m.args, m.meta, *p.Name, p.Arguments, p.Meta)
			}
		}
		// The SDK's decoder reads the same method and id.
		msg, err := jsonrpc.DecodeMessage(line)
		if err != nil {
			if m.hasMethod || m.id != nil {
				t.Fatalf("scanLine accepted %q; the SDK's decoder: %v", line, err)
			}
			return
		}
		var id jsonrpc.ID
		switch msg := msg.(type) {
		case *jsonrpc.Request:
			if !m.hasMethod || msg.Method != string(m.method) {
				t.Fatalf("scanLine(%q).method = %q; the SDK's: %q", line, m.method, msg.Method)
			}
			id = msg.ID
		case *jsonrpc.Response:
			id = msg.ID
		}
		if m.id == nil {
			if id.IsValid() {
				t.Fatalf("scanLine(%q) read no id; the SDK's decoder: %v", line, id.Raw())
			}
			return
		}
		var want any
		if m.id[0] == '"' {
			want = string(m.id[1 : len(m.id)-1])
		} else {
			n, err := strconv.ParseInt(string(m.id), 10, 64)
			if err != nil {
				t.Fatalf("scanLine(%q).id = %s: %v", line, m.id, err)
			}
			want = n
		}
		if id.Raw() != want {
			t.Fatalf("scanLine(%q).id = %s; the SDK's: %#v", line, m.id, id.Raw())
		}
	})
}

func TestScanLineRefusesAmbiguity(t *testing.T) {
	for _, tc := range []struct {
		line     string
		ok, call bool
	}{
		{scanSeeds[0], true, true},
		{scanSeeds[1], true, true},
		{scanSeeds[2], true, true},
		{scanSeeds[3], true, false},  // duplicate name: left to the SDK
		{scanSeeds[4], true, false},  // a case variant of name
		{scanSeeds[5], true, false},  // an escape in the name
		{scanSeeds[6], true, false},  // an escape in a key
		{scanSeeds[7], true, false},  // params not an object
		{scanSeeds[8], false, false}, // trailing data
		{scanSeeds[9], false, false}, // a float id
		{scanSeeds[10], false, false},
		{scanSeeds[14], false, false}, // isError twice, in two cases
		{scanSeeds[16], false, false}, // a result that is not an object
		{scanSeeds[17], false, false}, // invalid UTF-8
	} {
		var m rpcLine
		ok := scanLine([]byte(tc.line), &m)
		if ok != tc.ok || ok && m.toolsCall() != tc.call {
			t.Errorf("scanLine(%s) = %v, tools/call %v; want %v, %v", tc.line, ok, ok && m.toolsCall(), tc.ok, tc.call)
		}
	}
	var m rpcLine
	if !scanLine([]byte(scanSeeds[12]), &m) || !m.isError || string(m.id) != `"pcf-1"` {
		t.Errorf("scanLine(%s): isError %v id %s", scanSeeds[12], m.isError, m.id)
	}
}
