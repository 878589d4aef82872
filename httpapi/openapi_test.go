package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/httpapi"
	"github.com/portcullis/portcullis/memstore"
)

// openapiDoc is the part of an OpenAPI document the tests read.
type openapiDoc struct {
	OpenAPI    string                          `json:"openapi"`
	Paths      map[string]map[string]openapiOp `json:"paths"`
	Components struct {
		Schemas   map[string]json.RawMessage `json:"schemas"`
		Responses map[string]openapiResponse `json:"responses"`
	} `json:"components"`
}

type openapiOp struct {
	Security  []map[string][]string      `json:"security"`
	Responses map[string]openapiResponse `json:"responses"`
}

type openapiResponse struct {
	Ref     string `json:"$ref"`
	Content map[string]struct {
		Schema json.RawMessage `json:"schema"`
	} `json:"content"`
}

func loadDoc(t *testing.T) openapiDoc {
	t.Helper()
	var doc openapiDoc
	if err := json.Unmarshal(httpapi.OpenAPI(), &doc); err != nil {
		t.Fatalf("the OpenAPI document is not JSON: %v", err)
	}
	return doc
}

// The document served, the one embedded and the one in docs/ are one.
func TestOpenAPIDocumentIsServedAndKept(t *testing.T) {
	kept, err := os.ReadFile(filepath.Join("..", "docs", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(kept, httpapi.OpenAPI()) {
		t.Fatal("docs/openapi.json differs from httpapi/openapi.json: copy httpapi/openapi.json to docs/")
	}
	e := newEnv(t, envConfig{store: "memstore"})
	r := e.do("GET", "/v1/openapi.json", "", nil)
	if r.status != http.StatusOK || !bytes.Equal(r.body, kept) || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/openapi.json = %d %q, %d bytes; want the document", r.status, r.header.Get("Content-Type"), len(r.body))
	}
	if doc := loadDoc(t); doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi = %q; want 3.1.0", doc.OpenAPI)
	}
}

// Every documented operation is served by the real handlers, with the
// documented security, and every served endpoint is documented.
func TestOpenAPIMatchesHandlers(t *testing.T) {
	doc := loadDoc(t)
	st := memstore.New(nil)
	g, err := gate.New(&portcullis.Policy{Version: 1}, gate.WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{Gate: g, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]httpapi.Route{}
	for _, rt := range httpapi.Routes() {
		served[rt.Pattern] = rt
	}
	documented := map[string]bool{}
	param := regexp.MustCompile(`\{[a-zA-Z]+\}`)
	for path, ops := range doc.Paths {
		for method, op := range ops {
			pattern := strings.ToUpper(method) + " " + path
			documented[pattern] = true
			rt, ok := served[pattern]
			if !ok {
				t.Errorf("%s is documented but not served", pattern)
				continue
			}
			// The real mux routes a request of this shape to this endpoint.
			concrete := param.ReplaceAllString(path, "x1")
			if got := httpapi.Pattern(h, strings.ToUpper(method), concrete); got != pattern {
				t.Errorf("%s %s is routed to %q; want %q", strings.ToUpper(method), concrete, got, pattern)
			}
			var schemes []string
			for _, req := range op.Security {
				for name := range req {
					schemes = append(schemes, name)
				}
			}
			want := []string(nil)
			switch {
			case rt.People:
				want = []string{"humanToken"}
			case rt.Agents:
				want = []string{"agentToken"}
			}
			if fmt.Sprint(schemes) != fmt.Sprint(want) {
				t.Errorf("%s: documented security %v; want %v", pattern, schemes, want)
			}
			if (rt.People || rt.Agents) && (op.Responses["401"].Ref == "" || op.Responses["403"].Ref == "" || op.Responses["429"].Ref == "") {
				t.Errorf("%s: 401, 403 and 429 are not all documented", pattern)
			}
		}
	}
	for pattern := range served {
		if !documented[pattern] {
			t.Errorf("%s is served but not documented in openapi.json", pattern)
		}
	}
}

// schemaFor compiles a documented schema, its $refs resolved against the
// document's components.
func schemaFor(t *testing.T, doc openapiDoc, raw json.RawMessage) *jsonschema.Resolved {
	t.Helper()
	defs := map[string]json.RawMessage{}
	for name, s := range doc.Components.Schemas {
		defs[name] = rewriteRefs(s)
	}
	root, err := json.Marshal(map[string]any{"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": defs, "allOf": []json.RawMessage{rewriteRefs(raw)}})
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(root, &s); err != nil {
		t.Fatalf("schema: %v", err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("resolve schema: %v", err)
	}
	return rs
}

func rewriteRefs(b json.RawMessage) json.RawMessage {
	return bytes.ReplaceAll(b, []byte(`"#/components/schemas/`), []byte(`"#/$defs/`))
}

// conforms checks an answer against the document: its status is
// documented for the operation, and its body matches the documented schema
// (or is empty when none is documented).
func conforms(t *testing.T, doc openapiDoc, pattern string, r response) {
	t.Helper()
	method, path, _ := strings.Cut(pattern, " ")
	op, ok := doc.Paths[path][strings.ToLower(method)]
	if !ok {
		t.Fatalf("%s is not documented", pattern)
	}
	resp, ok := op.Responses[strconv.Itoa(r.status)]
	if !ok {
		t.Errorf("%s answered %s; status %d is not documented", pattern, r, r.status)
		return
	}
	if resp.Ref != "" {
		resp = doc.Components.Responses[strings.TrimPrefix(resp.Ref, "#/components/responses/")]
	}
	content, ok := resp.Content["application/json"]
	if !ok {
		if len(r.body) != 0 {
			t.Errorf("%s answered %d with a body, documented without: %s", pattern, r.status, r.body)
		}
		return
	}
	var v any
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Errorf("%s answered %d with a body that is not JSON: %s", pattern, r.status, r.body)
		return
	}
	if err := schemaFor(t, doc, content.Schema).Validate(v); err != nil {
		t.Errorf("%s answered %d with a body that does not match its documented schema: %v\n%s", pattern, r.status, err, r.body)
	}
}

// Every endpoint, in its successes and failures, answers as documented.
func TestAnswersMatchTheDocument(t *testing.T) {
	doc := loadDoc(t)
	e := newEnv(t, envConfig{})
	covered := map[string]bool{}
	check := func(pattern string, r response, status int) response {
		t.Helper()
		if r.status != status {
			t.Errorf("%s = %s; want %d", pattern, r, status)
		}
		conforms(t, doc, pattern, r)
		covered[pattern] = true
		return r
	}
	const (
		decide    = "POST /v1/decide"
		outcomes  = "POST /v1/outcomes"
		wait      = "GET /v1/decisions/{id}/wait"
		approvals = "GET /v1/approvals"
		approval  = "GET /v1/approvals/{id}"
		approve   = "POST /v1/approvals/{id}/approve"
		deny      = "POST /v1/approvals/{id}/deny"
		blocks    = "GET /v1/blocks"
		unblock   = "POST /v1/blocks/{agent}/unblock"
		grants    = "GET /v1/grants"
		revoke    = "DELETE /v1/grants/{id}"
	)
	check("GET /healthz", e.do("GET", "/healthz", "", nil), 200)
	check("GET /readyz", e.do("GET", "/readyz", "", nil), 200)
	check("GET /v1/openapi.json", e.do("GET", "/v1/openapi.json", "", nil), 200)

	check(decide, e.do("POST", "/v1/decide", botToken, `{"tool": "list_elements", "run": {"id": "r1"}}`), 200)
	check(decide, e.do("POST", "/v1/decide", botToken, `{"tool": 1}`), 400)
	check(decide, e.do("POST", "/v1/decide", botToken, `{}`, "Content-Type", "text/plain"), 415)
	check(decide, e.do("POST", "/v1/decide", botToken, `{"tool": "x", "args": {"a": "`+strings.Repeat("y", portcullis.MaxRequestBytes)+`"}}`), 413)
	check(decide, e.do("POST", "/v1/decide", "", `{"tool": "x"}`), 401)
	check(decide, e.do("POST", "/v1/decide", humanToken, `{"tool": "x"}`), 403)
	check(outcomes, e.do("POST", "/v1/outcomes", botToken, `{"runId": "r1", "outcome": "success"}`), 204)
	check(outcomes, e.do("POST", "/v1/outcomes", botToken, `{"runId": "r2", "outcome": "success"}`), 404)
	check(outcomes, e.do("POST", "/v1/outcomes", botToken, `{"runId": "r1"}`), 400)

	confirm := decodeDecision(t, check(decide, e.do("POST", "/v1/decide", botToken, `{"tool": "delete_element", "session": "s1"}`), 200).body)
	check(wait, e.do("GET", "/v1/decisions/"+confirm.DecisionID+"/wait?timeout=0", botToken, nil), 202)
	check(wait, e.do("GET", "/v1/decisions/nope/wait?timeout=0", botToken, nil), 404)
	check(wait, e.do("GET", "/v1/decisions/nope/wait?timeout=x", botToken, nil), 400)
	check(approvals, e.do("GET", "/v1/approvals?status=pending", humanToken, nil), 200)
	check(approvals, e.do("GET", "/v1/approvals?status=x", humanToken, nil), 400)
	check(approvals, e.do("GET", "/v1/approvals", botToken, nil), 403)
	check(approval, e.do("GET", "/v1/approvals/"+confirm.ChallengeID, humanToken, nil), 200)
	check(approval, e.do("GET", "/v1/approvals/nope", humanToken, nil), 404)
	check(approve, e.do("POST", "/v1/approvals/"+confirm.ChallengeID+"/approve", humanToken, `{"session": true}`), 400)
	check(approve, e.do("POST", "/v1/approvals/"+confirm.ChallengeID+"/approve", humanToken, nil), 200)
	check(approve, e.do("POST", "/v1/approvals/"+confirm.ChallengeID+"/approve", humanToken, nil), 409)
	check(approve, e.do("POST", "/v1/approvals/nope/approve", humanToken, nil), 404)
	check(grants, e.do("GET", "/v1/grants", humanToken, nil), 200)
	check(wait, e.do("GET", "/v1/decisions/"+confirm.DecisionID+"/wait", botToken, nil), 200)
	check(wait, e.do("GET", "/v1/decisions/"+confirm.DecisionID+"/wait", botToken, nil), 409)

	other := decodeDecision(t, check(decide, e.do("POST", "/v1/decide", botToken, `{"tool": "create_element", "session": "s1"}`), 200).body)
	check(deny, e.do("POST", "/v1/approvals/"+other.ChallengeID+"/deny", humanToken, `{"reason": 1}`), 400)
	check(deny, e.do("POST", "/v1/approvals/"+other.ChallengeID+"/deny", humanToken, `{"reason": "no"}`), 200)
	check(deny, e.do("POST", "/v1/approvals/"+other.ChallengeID+"/deny", humanToken, `{"reason": "no"}`), 409)
	check(deny, e.do("POST", "/v1/approvals/nope/deny", humanToken, nil), 404)
	check(wait, e.do("GET", "/v1/decisions/"+other.DecisionID+"/wait", botToken, nil), 200)

	session := decodeDecision(t, e.do("POST", "/v1/decide", botToken, `{"tool": "create_element", "session": "s2"}`).body)
	e.do("POST", "/v1/approvals/"+session.ChallengeID+"/approve", humanToken, `{"session": true}`)
	g := decodeInto[httpapi.GrantList](t, check(grants, e.do("GET", "/v1/grants?session=s2", humanToken, nil), 200))
	check(grants, e.do("GET", "/v1/grants?x=1", humanToken, nil), 400)
	check(revoke, e.do("DELETE", "/v1/grants/"+g.Grants[0].ID, humanToken, nil), 204)
	check(revoke, e.do("DELETE", "/v1/grants/"+g.Grants[0].ID, humanToken, nil), 404)

	stop := decodeDecision(t, check(decide, e.do("POST", "/v1/decide", botToken, `{"tool": "Bash", "args": {"command": "rm -rf /"}, "run": {"id": "r9"}}`), 200).body)
	check(blocks, e.do("GET", "/v1/blocks", humanToken, nil), 200)
	check(blocks, e.do("GET", "/v1/blocks?all=1", humanToken, nil), 400)
	check(unblock, e.do("POST", "/v1/blocks/deploy-bot/unblock", humanToken, `{"challengeId": "`+stop.ChallengeID+`", "code": "AAAAAA"}`), 400)
	check(unblock, e.do("POST", "/v1/blocks/nobody/unblock", humanToken, `{"challengeId": "c", "code": "AAAAAA"}`), 404)
	check(unblock, e.do("POST", "/v1/blocks/deploy-bot/unblock", humanToken, map[string]string{"challengeId": stop.ChallengeID, "code": e.human.Codes()[0]}), 204)
	for i := range 10 {
		e.do("GET", "/v1/blocks", fmt.Sprintf("wrong-token-%02d-xxxxxxxxxx", i), nil)
	}
	check(blocks, e.do("GET", "/v1/blocks", "wrong-token-10-xxxxxxxxxx", nil), 429)

	for _, rt := range httpapi.Routes() {
		if !covered[rt.Pattern] {
			t.Errorf("%s is not exercised by this test", rt.Pattern)
		}
	}
}
