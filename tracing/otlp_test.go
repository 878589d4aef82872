package tracing_test

import (
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/portcullis/portcullis/tracing"
)

// received is one request an OTLP endpoint got.
type received struct {
	path, contentType, encoding, userAgent string
	header                                 http.Header
	spans                                  []string // span names, decoded from the body
}

// collector is an httptest OTLP/HTTP endpoint that records what it gets
// and answers with answer (200 and an empty body when nil).
type collector struct {
	mu     sync.Mutex
	got    []received
	answer func(n int, w http.ResponseWriter)
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		body = gz
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	// The request is the collector's ExportTraceServiceRequest, which
	// is TracesData on the wire.
	var req tracepb.TracesData
	if err := proto.Unmarshal(raw, &req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	rec := received{path: r.URL.Path, contentType: r.Header.Get("Content-Type"), encoding: r.Header.Get("Content-Encoding"),
		userAgent: r.UserAgent(), header: r.Header.Clone()}
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				rec.spans = append(rec.spans, s.Name)
			}
		}
	}
	c.mu.Lock()
	c.got = append(c.got, rec)
	n := len(c.got)
	c.mu.Unlock()
	if c.answer != nil {
		c.answer(n, w)
	}
}

func (c *collector) requests() []received {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]received(nil), c.got...)
}

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// export sends one span named name through the exporter env configures.
func export(t *testing.T, env map[string]string, name string) error {
	t.Helper()
	ctx := context.Background()
	exp, err := tracing.NewOTLPExporter(ctx, envOf(env))
	if err != nil {
		t.Fatalf("NewOTLPExporter(%v): %v", env, err)
	}
	defer exp.Shutdown(ctx)
	return exp.ExportSpans(ctx, tracetest.SpanStubs{{Name: name}}.Snapshots())
}

func TestOTLPRequest(t *testing.T) {
	for _, tc := range []struct {
		name       string
		env        func(url string) map[string]string
		path, gzip string
		header     map[string]string
	}{
		{name: "general endpoint", path: "/v1/traces",
			env: func(u string) map[string]string { return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": u} }},
		{name: "general endpoint with a path", path: "/base/v1/traces",
			env: func(u string) map[string]string {
				return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": u + "/base/"}
			}},
		{name: "traces endpoint taken whole", path: "/custom",
			env: func(u string) map[string]string {
				return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": u + "/custom"}
			}},
		{name: "traces endpoint without a path", path: "/",
			env: func(u string) map[string]string { return map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": u} }},
		{name: "headers", path: "/v1/traces", header: map[string]string{"Api-Key": "a b=c", "X-Tenant": "t1"},
			env: func(u string) map[string]string {
				return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": u, "OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b%3Dc, x-tenant = t1 "}
			}},
		{name: "traces headers replace the general ones", path: "/v1/traces", header: map[string]string{"X-Tenant": "t2", "Api-Key": ""},
			env: func(u string) map[string]string {
				return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": u, "OTEL_EXPORTER_OTLP_HEADERS": "api-key=k",
					"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-tenant=t2"}
			}},
		{name: "gzip", path: "/v1/traces", gzip: "gzip",
			env: func(u string) map[string]string {
				return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": u, "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}
			}},
		{name: "traces compression overrides", path: "/v1/traces",
			env: func(u string) map[string]string {
				return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": u, "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "none"}
			}},
		{name: "insecure with an http endpoint", path: "/v1/traces",
			env: func(u string) map[string]string {
				return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": u, "OTEL_EXPORTER_OTLP_INSECURE": "TRUE"}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &collector{}
			srv := httptest.NewServer(c)
			defer srv.Close()
			if err := export(t, tc.env(srv.URL), "the span"); err != nil {
				t.Fatalf("ExportSpans: %v", err)
			}
			got := c.requests()
			if len(got) != 1 {
				t.Fatalf("the endpoint got %d requests; want 1", len(got))
			}
			r := got[0]
			if r.path != tc.path || r.contentType != "application/x-protobuf" || r.encoding != tc.gzip {
				t.Errorf("request = %s, Content-Type %q, Content-Encoding %q; want %s, application/x-protobuf, %q", r.path, r.contentType, r.encoding, tc.path, tc.gzip)
			}
			if !strings.HasPrefix(r.userAgent, "OTel OTLP Exporter Go/") {
				t.Errorf("User-Agent = %q; want the OTLP exporter's", r.userAgent)
			}
			if len(r.spans) != 1 || r.spans[0] != "the span" {
				t.Errorf("spans = %q; want [the span]", r.spans)
			}
			for k, v := range tc.header {
				if got := r.header.Get(k); got != v {
					t.Errorf("header %s = %q; want %q", k, got, v)
				}
			}
		})
	}
}

func TestOTLPRetries(t *testing.T) {
	defer tracing.SetOTLPRetry(time.Millisecond, 5*time.Millisecond, 300*time.Millisecond)()
	for _, tc := range []struct {
		name     string
		answer   func(n int, w http.ResponseWriter)
		requests int // at least
		ok       bool
	}{
		{"unavailable, then served", func(n int, w http.ResponseWriter) {
			if n < 3 {
				w.WriteHeader([]int{http.StatusServiceUnavailable, http.StatusTooManyRequests}[n-1])
			}
		}, 3, true},
		{"bad gateway, then served", func(n int, w http.ResponseWriter) {
			if n == 1 {
				w.WriteHeader(http.StatusBadGateway)
			}
		}, 2, true},
		{"gateway timeout, then served", func(n int, w http.ResponseWriter) {
			if n == 1 {
				w.WriteHeader(http.StatusGatewayTimeout)
			}
		}, 2, true},
		{"refused: not retried", func(n int, w http.ResponseWriter) { http.Error(w, "malformed", http.StatusBadRequest) }, 1, false},
		{"unavailable for good", func(n int, w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) }, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &collector{answer: tc.answer}
			srv := httptest.NewServer(c)
			defer srv.Close()
			err := export(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL}, "s")
			if (err == nil) != tc.ok {
				t.Errorf("ExportSpans = %v; want ok %v", err, tc.ok)
			}
			n := len(c.requests())
			if n < tc.requests || (tc.requests == 1 && n != 1) || (tc.ok && n != tc.requests) {
				t.Errorf("the endpoint got %d requests; want %d", n, tc.requests)
			}
		})
	}
}

func TestOTLPRetryAfterBeyondTheRetryTimeGivesUp(t *testing.T) {
	defer tracing.SetOTLPRetry(time.Millisecond, 5*time.Millisecond, time.Second)()
	c := &collector{answer: func(n int, w http.ResponseWriter) {
		w.Header().Set("Retry-After", "60")
		w.WriteHeader(http.StatusTooManyRequests)
	}}
	srv := httptest.NewServer(c)
	defer srv.Close()
	start := time.Now()
	err := export(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL}, "s")
	if err == nil || len(c.requests()) != 1 {
		t.Fatalf("ExportSpans = %v after %d requests; want it to give up after the first", err, len(c.requests()))
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("ExportSpans waited %s", took)
	}
}

func TestOTLPTimeout(t *testing.T) {
	defer tracing.SetOTLPRetry(time.Millisecond, 5*time.Millisecond, 200*time.Millisecond)()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	err := export(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "20"}, "s")
	var timeout interface{ Timeout() bool }
	if !errors.As(err, &timeout) || !timeout.Timeout() {
		t.Fatalf("ExportSpans to an endpoint that never answers = %v; want a timeout", err)
	}
}

func TestOTLPPartialSuccess(t *testing.T) {
	// ExportTraceServiceResponse{partial_success: {rejected_spans: 2, error_message: "too old"}}
	var ps []byte
	ps = protowire.AppendTag(ps, 1, protowire.VarintType)
	ps = protowire.AppendVarint(ps, 2)
	ps = protowire.AppendTag(ps, 2, protowire.BytesType)
	ps = protowire.AppendString(ps, "too old")
	var resp []byte
	resp = protowire.AppendTag(resp, 1, protowire.BytesType)
	resp = protowire.AppendBytes(resp, ps)

	var handled []error
	var mu sync.Mutex
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		handled = append(handled, err)
		mu.Unlock()
	}))
	defer otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{"partial success", resp, "OTLP partial success: too old (2 spans rejected)"},
		{"full success", protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), nil), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			handled = nil
			mu.Unlock()
			c := &collector{answer: func(n int, w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/x-protobuf")
				w.Write(tc.body)
			}}
			srv := httptest.NewServer(c)
			defer srv.Close()
			if err := export(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL}, "s"); err != nil {
				t.Fatalf("ExportSpans: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case tc.want == "" && len(handled) != 0:
				t.Errorf("errors handled = %v; want none", handled)
			case tc.want != "" && (len(handled) != 1 || handled[0].Error() != tc.want):
				t.Errorf("errors handled = %v; want [%s]", handled, tc.want)
			}
		})
	}
}

func TestOTLPCertificate(t *testing.T) {
	c := &collector{}
	srv := httptest.NewUnstartedServer(c)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake the untrusted client fails
	srv.StartTLS()
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := export(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL}, "s"); err == nil {
		t.Error("ExportSpans trusted a certificate no root signed")
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE"} {
		if err := export(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL, v: ca}, "s"); err != nil {
			t.Errorf("ExportSpans with %s: %v", v, err)
		}
	}
	if n := len(c.requests()); n != 2 {
		t.Errorf("the endpoint got %d requests; want 2", n)
	}
}

// TestOTLPClientCertificate: the client presents the certificate the
// variables name to an endpoint that requires one.
func TestOTLPClientCertificate(t *testing.T) {
	var presented atomic.Bool
	c := &collector{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		presented.Store(r.TLS != nil && len(r.TLS.PeerCertificates) > 0)
		c.ServeHTTP(w, r)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	srv.StartTLS()
	defer srv.Close()
	dir := t.TempDir()
	// The server's own certificate and key serve as the client's.
	cert := srv.TLS.Certificates[0]
	certFile, keyFile, caFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem"), filepath.Join(dir, "ca.pem")
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	for file, block := range map[string]*pem.Block{
		certFile: {Type: "CERTIFICATE", Bytes: cert.Certificate[0]},
		caFile:   {Type: "CERTIFICATE", Bytes: srv.Certificate().Raw},
		keyFile:  {Type: "PRIVATE KEY", Bytes: key},
	} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := export(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL, "OTEL_EXPORTER_OTLP_CERTIFICATE": caFile,
		"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": certFile, "OTEL_EXPORTER_OTLP_CLIENT_KEY": keyFile}, "s"); err != nil {
		t.Fatalf("ExportSpans: %v", err)
	}
	if !presented.Load() {
		t.Error("the client presented no certificate")
	}
}

func TestOTLPBadVariablesFailAtStart(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.pem")
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, env := range map[string][2]string{
		"timeout not a number":  {"OTEL_EXPORTER_OTLP_TIMEOUT", "10s"},
		"timeout zero":          {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "0"},
		"compression":           {"OTEL_EXPORTER_OTLP_COMPRESSION", "zstd"},
		"header without value":  {"OTEL_EXPORTER_OTLP_HEADERS", "api-key"},
		"header name":           {"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "bad key=1"},
		"header escape":         {"OTEL_EXPORTER_OTLP_HEADERS", "k=%zz"},
		"certificate missing":   {"OTEL_EXPORTER_OTLP_CERTIFICATE", missing},
		"certificate not PEM":   {"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", notPEM},
		"client cert alone":     {"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", notPEM},
		"endpoint without host": {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "collector:4318"},
	} {
		t.Run(name, func(t *testing.T) {
			for _, v := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
				t.Setenv(v, "")
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
			t.Setenv(env[0], env[1])
			if tr, _, err := tracing.FromEnv(context.Background(), "v1"); err == nil || tr != nil {
				t.Errorf("FromEnv with %s=%s = %v, %v; want an error", env[0], env[1], tr, err)
			}
		})
	}
}

// TestOTLPShutdownEndsAnUploadInFlight: stopping the exporter ends an
// upload waiting on an endpoint that does not answer, rather than holding
// the process's exit for the upload's timeout.
func TestOTLPShutdownEndsAnUploadInFlight(t *testing.T) {
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx := context.Background()
	exp, err := tracing.NewOTLPExporter(ctx, envOf(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL, "OTEL_EXPORTER_OTLP_TIMEOUT": "60000"}))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- exp.ExportSpans(ctx, tracetest.SpanStubs{{Name: "s"}}.Snapshots()) }()
	<-arrived
	if err := exp.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("ExportSpans = %v; want it cancelled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ExportSpans still waits after Shutdown")
	}
}

// TestOTLPHeaderErrorsKeepValuesSecret: a header list the client cannot
// use is an error at start that names the variable, the element and its
// key, and never the value or the whole element (API keys and tokens).
func TestOTLPHeaderErrorsKeepValuesSecret(t *testing.T) {
	for name, tc := range map[string]struct {
		headers string
		want    []string
	}{
		"no =":              {"Authorization Bearer s3cr3t", []string{"element 1", "not name=value"}},
		"colon for =":       {"api-key=abc,Authorization: Bearer s3cr3t", []string{"element 2", "not name=value"}},
		"bare token":        {"s3cr3t", []string{"element 1", "not name=value"}},
		"name not a token":  {"Authorization: Bearer x=s3cr3t", []string{"element 1", "not a valid header name"}},
		"comma in value":    {"authorization=Bearer s3cr3t,s3cr3t", []string{"element 2", "not name=value"}},
		"bad escape":        {"x-api-key=s3cr3t%zzs3cr3t", []string{"element 1 (x-api-key)", "not URL-encoded"}},
		"CR LF":             {"a=1,authorization=Bearer%20s3cr3t%0D%0AX-Evil:%201", []string{"element 2 (authorization)", "control character"}},
		"NUL":               {"x-api-key=s3cr3t%00", []string{"element 1 (x-api-key)", "control character"}},
		"DEL":               {"x-api-key=s3cr3t%7F", []string{"element 1 (x-api-key)", "control character"}},
		"traces variable":   {"x-api-key=%zzs3cr3t", []string{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "element 1 (x-api-key)"}},
		"empty then broken": {",,s3cr3t", []string{"element 3", "not name=value"}},
	} {
		t.Run(name, func(t *testing.T) {
			variable := "OTEL_EXPORTER_OTLP_HEADERS"
			if name == "traces variable" {
				variable = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
			}
			_, err := tracing.NewOTLPExporter(context.Background(), envOf(map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", variable: tc.headers}))
			if err == nil {
				t.Fatalf("NewOTLPExporter(%s=%q) = nil error; want one", variable, tc.headers)
			}
			if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "%zz") || strings.Contains(err.Error(), "Bearer") {
				t.Errorf("NewOTLPExporter(%s) = %q; it shows (part of) a value", name, err)
			}
			for _, w := range append(tc.want, variable) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("NewOTLPExporter(%s) = %q; want it to say %q", name, err, w)
				}
			}
		})
	}
}

// TestOTLPHeadersEmptyElements: empty elements in a header list (a
// trailing comma) are skipped, as the official client skips them.
func TestOTLPHeadersEmptyElements(t *testing.T) {
	c := &collector{}
	srv := httptest.NewServer(c)
	defer srv.Close()
	for _, h := range []string{"api-key=abc,", "api-key=abc, ", ", api-key=abc,,tenant=t1"} {
		if err := export(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL, "OTEL_EXPORTER_OTLP_HEADERS": h}, "s"); err != nil {
			t.Errorf("ExportSpans with OTEL_EXPORTER_OTLP_HEADERS=%q: %v", h, err)
		}
	}
	got := c.requests()
	if len(got) != 3 {
		t.Fatalf("the endpoint got %d requests; want 3", len(got))
	}
	for i, r := range got {
		if k := r.header.Get("Api-Key"); k != "abc" {
			t.Errorf("request %d: api-key = %q; want abc", i, k)
		}
	}
	if v := got[2].header.Get("Tenant"); v != "t1" {
		t.Errorf("request 3: tenant = %q; want t1", v)
	}
}

// TestOTLPRedirectNotFollowed: an endpoint that redirects fails the
// export, and where it points gets nothing, not the configured headers.
func TestOTLPRedirectNotFollowed(t *testing.T) {
	var harvested atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { harvested.Add(1) }))
	defer other.Close()
	target := strings.Replace(other.URL, "127.0.0.1", "localhost", 1) + "/harvest?token=s3cr3t"
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target, status)
		}))
		err := export(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL,
			"OTEL_EXPORTER_OTLP_HEADERS": "x-honeycomb-team=abc,authorization=Bearer%20tok"}, "s")
		srv.Close()
		if err == nil {
			t.Errorf("ExportSpans to an endpoint answering %d = nil; want an error", status)
			continue
		}
		if want := http.StatusText(status); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "redirect") {
			t.Errorf("ExportSpans to an endpoint answering %d = %q; want it to say %q and redirect", status, err, want)
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("ExportSpans to an endpoint answering %d = %q; it shows the Location's query", status, err)
		}
	}
	if n := harvested.Load(); n != 0 {
		t.Errorf("the redirect's target got %d requests; want none", n)
	}
}

// TestOTLPInsecureWithHTTPSEndpoint: INSECURE=true does not turn an
// endpoint given as https into plain HTTP; the two together are an error
// at start. It still applies to the default endpoint, and an http
// endpoint is plain HTTP with or without it.
func TestOTLPInsecureWithHTTPSEndpoint(t *testing.T) {
	for name, tc := range map[string]struct {
		env  map[string]string
		want []string // what the error says; nil: no error
	}{
		"endpoint": {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector:4318", "OTEL_EXPORTER_OTLP_INSECURE": "true"},
			[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_INSECURE"}},
		"traces endpoint": {map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://collector:4318/v1/traces", "OTEL_EXPORTER_OTLP_INSECURE": "TRUE"},
			[]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_INSECURE"}},
		"traces insecure": {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector:4318", "OTEL_EXPORTER_OTLP_TRACES_INSECURE": "true"},
			[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_INSECURE"}},
		"traces insecure false wins": {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector:4318",
			"OTEL_EXPORTER_OTLP_INSECURE": "true", "OTEL_EXPORTER_OTLP_TRACES_INSECURE": "false"}, nil},
		"http traces endpoint wins": {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector:4318",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces", "OTEL_EXPORTER_OTLP_INSECURE": "true"}, nil},
		"http endpoint":    {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_INSECURE": "true"}, nil},
		"default endpoint": {map[string]string{"OTEL_EXPORTER_OTLP_INSECURE": "true"}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			exp, err := tracing.NewOTLPExporter(context.Background(), envOf(tc.env))
			if exp != nil {
				defer exp.Shutdown(context.Background())
			}
			if tc.want == nil {
				if err != nil {
					t.Errorf("NewOTLPExporter(%v) = %v; want no error", tc.env, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("NewOTLPExporter(%v) = nil error; want one", tc.env)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("NewOTLPExporter(%v) = %q; want it to name %s", tc.env, err, w)
				}
			}
		})
	}

	// The https endpoint of a plain HTTP server: the request goes nowhere
	// in the clear.
	c := &collector{}
	srv := httptest.NewServer(c)
	defer srv.Close()
	env := map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": strings.Replace(srv.URL, "http://", "https://", 1) + "/v1/traces",
		"OTEL_EXPORTER_OTLP_INSECURE": "true", "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20tok"}
	if exp, err := tracing.NewOTLPExporter(context.Background(), envOf(env)); err == nil {
		if err := exp.ExportSpans(context.Background(), tracetest.SpanStubs{{Name: "s"}}.Snapshots()); err != nil {
			t.Logf("ExportSpans: %v", err)
		}
		exp.Shutdown(context.Background())
	}
	if n := len(c.requests()); n != 0 {
		t.Errorf("a plain HTTP server got %d requests for an https endpoint; want none", n)
	}
}

// TestOTLPLargeResponseBodies: a 2xx answer with a body over the limit
// counts as an export done (a note goes to the error handler), and an
// error answer's body is cut to about a KiB in the error.
func TestOTLPLargeResponseBodies(t *testing.T) {
	var handled []error
	var mu sync.Mutex
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		handled = append(handled, err)
		mu.Unlock()
	}))
	defer otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))

	// A valid ExportTraceServiceResponse of 2 MiB: an unknown field 2.
	big := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), make([]byte, 2<<20))
	ok := &collector{answer: func(n int, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(big)
	}}
	srv := httptest.NewServer(ok)
	defer srv.Close()
	if err := export(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL}, "s"); err != nil {
		t.Errorf("ExportSpans answered 200 with a 2 MiB body = %v; want nil", err)
	}
	mu.Lock()
	if len(handled) != 1 || !strings.Contains(handled[0].Error(), "200 OK") {
		t.Errorf("errors handled = %v; want one note of the body not read", handled)
	}
	mu.Unlock()

	for _, status := range []int{http.StatusBadRequest, http.StatusServiceUnavailable} {
		bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "é"+strings.Repeat("x", 900<<10), status)
		}))
		restore := tracing.SetOTLPRetry(time.Millisecond, time.Millisecond, 5*time.Millisecond)
		err := export(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": bad.URL}, "s")
		restore()
		bad.Close()
		if err == nil {
			t.Errorf("ExportSpans answered %d = nil; want an error", status)
			continue
		}
		if n := len(err.Error()); n > 2<<10 {
			t.Errorf("ExportSpans answered %d with a 900 KiB body: error of %d bytes; want at most 2 KiB", status, n)
		}
		if !strings.Contains(err.Error(), "éxxx") || !utf8.ValidString(err.Error()) {
			t.Errorf("ExportSpans answered %d: error %.200q…; want the body's start, valid UTF-8", status, err)
		}
	}
}
