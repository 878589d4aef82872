package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// This file is the OTLP/HTTP client under the official OTLP trace exporter
// (otlptrace, which turns the SDK's spans into OTLP's protobuf messages).
// It takes the place of the official otlptracehttp client, whose
// configuration package imports gRPC: linking it put gRPC, grpc-gateway and
// HTTP/2 into every portcullis process, and their package initialisation
// into its start, whether or not traces were exported (about 2 MB of
// resident memory in an idle `serve`, docs/BENCHMARKS.md). It reads the
// OTEL_EXPORTER_OTLP_* variables as that client does, and sends what it
// sends: protocol http/protobuf, the retries on 429, 502, 503 and 504, and
// a partial success reported to the OpenTelemetry error handler. Unlike
// it, a variable it cannot use is an error at start rather than a line on
// stderr and a setting silently dropped.

// otlpRetry is how long the client waits before its first retry, and the
// longest wait and total time it retries for (the official client's).
var otlpRetry = struct{ initial, max, elapsed time.Duration }{5 * time.Second, 30 * time.Second, time.Minute}

// otlpConfig is the client's configuration, from the OTEL_EXPORTER_OTLP_*
// variables.
type otlpConfig struct {
	url         url.URL
	headers     map[string]string
	gzip        bool
	timeout     time.Duration
	tls         *tls.Config // nil: the system's roots, no client certificate
	userAgent   string
	maxRespBody int64
}

// otlpFromEnv reads the OTLP exporter's variables as the official HTTP
// client does: a OTEL_EXPORTER_OTLP_TRACES_* variable overrides its
// OTEL_EXPORTER_OTLP_* peer; the general endpoint gets /v1/traces
// appended, the traces endpoint is taken whole (its path "/" when it has
// none, as the OTel specification says); the scheme says whether
// TLS is used. An INSECURE variable set to true turns the default endpoint
// (or one whose scheme is http) to plain HTTP; with an endpoint variable
// that says https it is an error, rather than credentials sent in the clear.
func otlpFromEnv(getenv func(string) string) (*otlpConfig, error) {
	env := func(name string) (string, bool) {
		v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + name))
		return v, v != ""
	}
	cfg := &otlpConfig{
		url:         url.URL{Scheme: "https", Host: "localhost:4318", Path: "/v1/traces"},
		timeout:     10 * time.Second,
		userAgent:   "OTel OTLP Exporter Go/" + otlptrace.Version() + " (portcullis)",
		maxRespBody: 1 << 20,
	}
	// tlsEndpoint names the endpoint variable that asks for TLS, if any.
	tlsEndpoint := ""
	for _, name := range []string{"ENDPOINT", "TRACES_ENDPOINT"} {
		v, ok := env(name)
		if !ok {
			continue
		}
		u, err := url.Parse(v)
		if err != nil {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_%s: %w", name, err)
		}
		if u.Host == "" {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_%s=%q: want a URL such as http://collector:4318", name, v)
		}
		cfg.url.Scheme, tlsEndpoint = "https", "OTEL_EXPORTER_OTLP_"+name
		if s := strings.ToLower(u.Scheme); s == "http" || s == "unix" {
			cfg.url.Scheme, tlsEndpoint = "http", ""
		}
		cfg.url.Host = u.Host
		switch {
		case name == "ENDPOINT":
			cfg.url.Path = path.Join(u.Path, "/v1/traces")
		case u.Path == "":
			cfg.url.Path = "/" // the specification's rule for a signal's endpoint without a path
		default:
			cfg.url.Path = u.Path
		}
	}

	var roots *x509.CertPool
	var certs []tls.Certificate
	for _, prefix := range []string{"", "TRACES_"} {
		if file, ok := env(prefix + "CERTIFICATE"); ok {
			pem, err := os.ReadFile(file)
			if err != nil {
				return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_%sCERTIFICATE: %w", prefix, err)
			}
			roots = x509.NewCertPool()
			if !roots.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_%sCERTIFICATE: %s holds no PEM certificate", prefix, file)
			}
		}
		certFile, okc := env(prefix + "CLIENT_CERTIFICATE")
		keyFile, okk := env(prefix + "CLIENT_KEY")
		if okc != okk {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_%sCLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_%[1]sCLIENT_KEY go together", prefix)
		}
		if okc {
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_%sCLIENT_CERTIFICATE: %w", prefix, err)
			}
			certs = []tls.Certificate{cert}
		}
	}
	if roots != nil || certs != nil {
		cfg.tls = &tls.Config{RootCAs: roots, Certificates: certs}
	}

	// insecure names the INSECURE variable in effect, if any.
	insecure := ""
	for _, prefix := range []string{"", "TRACES_"} {
		if v, ok := env(prefix + "INSECURE"); ok {
			insecure = "OTEL_EXPORTER_OTLP_" + prefix + "INSECURE"
			cfg.url.Scheme = "https"
			if strings.EqualFold(v, "true") {
				cfg.url.Scheme = "http"
			}
		}
		if v, ok := env(prefix + "HEADERS"); ok {
			h, err := otlpHeaders(v)
			if err != nil {
				return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_%sHEADERS: %w", prefix, err)
			}
			cfg.headers = h
		}
		if v, ok := env(prefix + "COMPRESSION"); ok {
			switch v {
			case "gzip":
				cfg.gzip = true
			case "none":
				cfg.gzip = false
			default:
				return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_%sCOMPRESSION=%q: want gzip or none", prefix, v)
			}
		}
		if v, ok := env(prefix + "TIMEOUT"); ok {
			ms, err := strconv.Atoi(v)
			if err != nil || ms <= 0 {
				return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_%sTIMEOUT=%q: want a positive number of milliseconds", prefix, v)
			}
			cfg.timeout = time.Duration(ms) * time.Millisecond
		}
	}
	if tlsEndpoint != "" && cfg.url.Scheme == "http" {
		// The specification's INSECURE is for gRPC endpoints without a
		// scheme; over HTTP the endpoint's scheme decides.
		return nil, fmt.Errorf("%s is https but %s=true asks for plain HTTP, which would send the spans and headers unencrypted: "+
			"give an http:// endpoint for a collector without TLS, or unset %[2]s", tlsEndpoint, insecure)
	}
	return cfg, nil
}

// otlpHeaders parses a list of key=value pairs separated by commas, each
// value URL-encoded (the OTel specification's format); empty elements are
// skipped, as the official client does. The values are secrets as often
// as not (API keys, bearer tokens): an error names the element by its
// position and its key, when the key is a header name, and never quotes
// the value or the element.
func otlpHeaders(s string) (map[string]string, error) {
	h := map[string]string{}
	i := 0
	for pair := range strings.SplitSeq(s, ",") {
		i++
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok {
			return nil, fmt.Errorf("element %d is not name=value", i)
		}
		if !validHeaderKey(k) {
			return nil, fmt.Errorf("element %d: the name before = is not a valid header name", i)
		}
		v, err := url.PathUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("element %d (%s): the value is not URL-encoded (a %% not followed by two hex digits)", i, k)
		}
		v = strings.TrimSpace(v)
		if !validHeaderValue(v) {
			return nil, fmt.Errorf("element %d (%s): the decoded value holds a control character (such as CR or LF)", i, k)
		}
		h[k] = v
	}
	return h, nil
}

// validHeaderValue reports whether v holds no control character other
// than a tab (RFC 9110's field-value, as Go's HTTP client checks it).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// validHeaderKey reports whether k is an HTTP token (RFC 9110).
func validHeaderKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// otlpClient sends spans to an OTLP/HTTP endpoint (otlptrace.Client).
type otlpClient struct {
	cfg  *otlpConfig
	http *http.Client
	// stopped ends the uploads in flight when the exporter stops.
	stopped context.Context
	stop    context.CancelFunc
}

var _ otlptrace.Client = (*otlpClient)(nil)

func newOTLPClient(cfg *otlpConfig) *otlpClient {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyFromEnvironment
	if cfg.tls != nil {
		tr.TLSClientConfig = cfg.tls
	}
	c := &otlpClient{cfg: cfg, http: &http.Client{
		Transport: tr,
		Timeout:   cfg.timeout,
		// A collector does not redirect, and a redirect to another host
		// would carry the configured headers (API keys under names Go
		// does not know to drop) there: a 3xx is a failed export.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	c.stopped, c.stop = context.WithCancel(context.Background())
	return c
}

// Start does nothing: each upload opens its connection as needed.
func (c *otlpClient) Start(ctx context.Context) error { return ctx.Err() }

// Stop ends the uploads in flight and closes the idle connections.
func (c *otlpClient) Stop(ctx context.Context) error {
	c.stop()
	c.http.CloseIdleConnections()
	return ctx.Err()
}

// UploadTraces sends one export request, retrying while the endpoint
// answers that it is overloaded or unavailable (429, 502, 503, 504) or
// the request times out, for at most a minute, with exponential backoff
// (or the Retry-After the endpoint asks for, when longer).
func (c *otlpClient) UploadTraces(ctx context.Context, spans []*tracepb.ResourceSpans) error {
	// TracesData is the same message on the wire as the collector's
	// ExportTraceServiceRequest (field 1, repeated ResourceSpans), whose
	// package would link gRPC.
	body, err := proto.Marshal(&tracepb.TracesData{ResourceSpans: spans})
	if err != nil {
		return err
	}
	if c.cfg.gzip {
		var b bytes.Buffer
		gz := gzip.NewWriter(&b)
		if _, err := gz.Write(body); err != nil {
			return err
		}
		if err := gz.Close(); err != nil {
			return err
		}
		body = b.Bytes()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.stopped, cancel)()

	start := time.Now()
	backoff := otlpRetry.initial
	for {
		retryAfter, err := c.post(ctx, body)
		if err == nil || retryAfter < 0 {
			return err
		}
		// Randomised by ±50% around the interval, as the official client.
		wait := backoff/2 + rand.N(backoff+1)
		wait = max(wait, retryAfter)
		if time.Since(start)+wait > otlpRetry.elapsed {
			return fmt.Errorf("gave up retrying after %s: %w", time.Since(start).Round(time.Millisecond), err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %w", context.Cause(ctx), err)
		case <-t.C:
		}
		backoff = min(backoff*3/2, otlpRetry.max)
	}
}

// post sends body once. A retryAfter of 0 or more says the failure may
// pass (and how long the endpoint asked to wait); -1 that it will not.
func (c *otlpClient) post(ctx context.Context, body []byte) (retryAfter time.Duration, _ error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.url.String(), bytes.NewReader(body))
	if err != nil {
		return -1, err
	}
	req.Header.Set("User-Agent", c.cfg.userAgent)
	for k, v := range c.cfg.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if c.cfg.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ne net.Error
		if ctx.Err() == nil && errors.As(err, &ne) && ne.Timeout() {
			return 0, err // timed out: retried, as the official client does
		}
		return -1, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.maxRespBody+1))
	if err != nil {
		return -1, err
	}
	switch sc := resp.StatusCode; {
	case sc >= 200 && sc <= 299 && int64(len(data)) > c.cfg.maxRespBody:
		// The spans were accepted; a partial success, if the body holds
		// one, cannot be read from its first part.
		otel.Handle(fmt.Errorf("OTLP response from %s: %s with a body over %d bytes, not read for a partial success", c.cfg.url.Redacted(), resp.Status, c.cfg.maxRespBody))
		return -1, nil
	case sc >= 200 && sc <= 299:
		if len(data) > 0 && resp.Header.Get("Content-Type") == "application/x-protobuf" {
			rejected, msg, err := partialSuccess(data)
			if err != nil {
				return -1, fmt.Errorf("the OTLP response: %w", err)
			}
			if rejected != 0 || msg != "" {
				if msg == "" {
					msg = "empty message"
				}
				otel.Handle(fmt.Errorf("OTLP partial success: %s (%d spans rejected)", msg, rejected))
			}
		}
		return -1, nil
	case sc == http.StatusTooManyRequests, sc == http.StatusBadGateway, sc == http.StatusServiceUnavailable, sc == http.StatusGatewayTimeout:
		retryAfter = 0
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			retryAfter = time.Duration(s) * time.Second
		}
		return retryAfter, fmt.Errorf("send to %s: %s (body: %s)", c.cfg.url.Redacted(), resp.Status, bodyText(data))
	case sc >= 300 && sc <= 399:
		return -1, fmt.Errorf("send to %s: %s: the endpoint redirects%s, and the exporter does not follow redirects; "+
			"set the endpoint variable to the collector's own URL", c.cfg.url.Redacted(), resp.Status, redirectTarget(resp))
	default:
		return -1, fmt.Errorf("send to %s: %s (body: %s)", c.cfg.url.Redacted(), resp.Status, bodyText(data))
	}
}

// bodyTextMax is how much of an error response's body an error shows.
const bodyTextMax = 1 << 10

// bodyText is an error response's body as an error shows it: its first
// KiB, cut at a character's boundary.
func bodyText(b []byte) string {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "(empty)"
	}
	if len(s) <= bodyTextMax {
		return s
	}
	cut := bodyTextMax
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (the first %d of %d bytes read)", s[:cut], cut, len(s))
}

// redirectTarget is " to " and where resp redirects, its scheme, host and
// path only (a query or user name may carry a token), or "" when it has
// no usable Location.
func redirectTarget(resp *http.Response) string {
	loc, err := resp.Location()
	if err != nil {
		return ""
	}
	u := url.URL{Scheme: loc.Scheme, Host: loc.Host, Path: loc.Path}
	return " to " + u.String()
}

// partialSuccess reads an ExportTraceServiceResponse: its partial_success
// (field 1) holds rejected_spans (1, int64) and error_message (2, string).
func partialSuccess(b []byte) (rejected int64, msg string, _ error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, "", protowire.ParseError(n)
		}
		b = b[n:]
		if num != 1 || typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return 0, "", protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		ps, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return 0, "", protowire.ParseError(n)
		}
		b = b[n:]
		for len(ps) > 0 {
			num, typ, n := protowire.ConsumeTag(ps)
			if n < 0 {
				return 0, "", protowire.ParseError(n)
			}
			ps = ps[n:]
			switch {
			case num == 1 && typ == protowire.VarintType:
				v, n := protowire.ConsumeVarint(ps)
				if n < 0 {
					return 0, "", protowire.ParseError(n)
				}
				rejected, ps = int64(v), ps[n:]
			case num == 2 && typ == protowire.BytesType:
				v, n := protowire.ConsumeBytes(ps)
				if n < 0 {
					return 0, "", protowire.ParseError(n)
				}
				msg, ps = string(v), ps[n:]
			default:
				n := protowire.ConsumeFieldValue(num, typ, ps)
				if n < 0 {
					return 0, "", protowire.ParseError(n)
				}
				ps = ps[n:]
			}
		}
	}
	return rejected, msg, nil
}
