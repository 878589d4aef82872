// Package guard holds the rules every HTTP entry point of the gateway
// applies before it looks at what a request asks: which Host names it
// answers (the defence against DNS rebinding), which Origin a browser's
// request may carry, who a client is when wrong credentials are counted,
// how those are counted and reported, and how long a client may take to
// send a body. The decision and approvals API, the console and the MCP
// endpoint of one `portcullis serve` share one Guard, so they agree.
//
// It imports only the standard library and golang.org/x/time/rate.
package guard

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// LoopbackHosts are the names a gateway answers when no allow-list is
// given: the loopback names, on any port.
func LoopbackHosts() []string { return []string{"localhost", "127.0.0.1", "::1"} }

// Sites says where requests may come from: the Host allow-list and the
// origins a browser's request may name. The zero value allows nothing; make
// one with NewSites. It is safe for concurrent use.
type Sites struct {
	hosts   []hostRule
	origins []endpoint // extra origins besides the request's own
}

// hostRule is one entry of the Host allow-list.
type hostRule struct {
	host string // normalized (see normHost)
	port string // "" allows any port
}

// endpoint is an origin: scheme, host and port, the port always explicit.
type endpoint struct{ scheme, host, port string }

// NewSites makes the allow-lists. hosts are Host header values: "name"
// allows the name on any port, "name:port" (or "[v6]:port") on that port
// only; empty allows LoopbackHosts. origins are origins
// ("https://gate.example.com") a browser's request may name besides the
// gateway's own (the origin of the request's allowed Host); a public URL
// behind a TLS-terminating proxy is one.
func NewSites(hosts, origins []string) (*Sites, error) {
	s := &Sites{}
	if len(hosts) == 0 {
		hosts = LoopbackHosts()
	}
	for _, h := range hosts {
		host, port, err := splitHostPort(strings.TrimSpace(h))
		if err != nil || host == "" || strings.ContainsAny(host, "/ @?#") {
			return nil, fmt.Errorf("allowed host %q: want a host name or address, optionally with :port", h)
		}
		s.hosts = append(s.hosts, hostRule{host: host, port: port})
	}
	for _, o := range origins {
		e, err := parseOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("allowed origin %q: %w", o, err)
		}
		s.origins = append(s.origins, e)
	}
	return s, nil
}

// HostAllowed reports whether a Host header value is on the allow-list. A
// Host without a port matches rules without a port, and rules naming the
// default port of the request's scheme (tls: 443, else 80).
func (s *Sites) HostAllowed(hostport string, tls bool) bool {
	host, port, err := splitHostPort(hostport)
	if err != nil || host == "" {
		return false
	}
	if port == "" {
		port = defaultPort(tls)
	}
	for _, rule := range s.hosts {
		if rule.host == host && (rule.port == "" || rule.port == port) {
			return true
		}
	}
	return false
}

// CheckHost refuses a request whose Host is not on the allow-list.
func (s *Sites) CheckHost(r *http.Request) error {
	if !s.HostAllowed(r.Host, r.TLS != nil) {
		return fmt.Errorf("host %q is not allowed", r.Host)
	}
	return nil
}

// ErrNoOrigin is CheckOrigin's answer to a request without an Origin
// header: callers that serve only browsers' forms refuse it; the API and
// the MCP endpoint, whose clients are mostly not browsers, accept it.
var ErrNoOrigin = errors.New("the request names no Origin")

// CheckOrigin checks a request's Origin header: it must be the origin of
// the request itself (its scheme — https when it came over TLS — and its
// Host's name and port) or one of the extra origins. An opaque ("null") or malformed
// Origin is refused. Without an Origin it returns ErrNoOrigin. It does not
// check the Host itself (see CheckHost).
func (s *Sites) CheckOrigin(r *http.Request) error {
	o := r.Header.Get("Origin")
	if o == "" {
		return ErrNoOrigin
	}
	if o == "null" {
		return errors.New("the request's Origin is opaque (null)")
	}
	got, err := parseOrigin(o)
	if err != nil {
		return fmt.Errorf("origin %q: %w", o, err)
	}
	if host, port, err := splitHostPort(r.Host); err == nil && host != "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		if port == "" {
			port = defaultPort(r.TLS != nil)
		}
		if got == (endpoint{scheme, host, port}) {
			return nil
		}
	}
	for _, e := range s.origins {
		if got == e {
			return nil
		}
	}
	return fmt.Errorf("origin %q is not this gateway's", o)
}

// parseOrigin reads "scheme://host[:port]" with scheme http or https.
func parseOrigin(o string) (endpoint, error) {
	u, err := url.Parse(strings.ToLower(strings.TrimSpace(o)))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return endpoint{}, errors.New("want http(s)://host[:port]")
	}
	host, port, err := splitHostPort(u.Host)
	if err != nil || host == "" {
		return endpoint{}, errors.New("want http(s)://host[:port]")
	}
	if port == "" {
		port = defaultPort(u.Scheme == "https")
	}
	return endpoint{u.Scheme, host, port}, nil
}

func defaultPort(tls bool) string {
	if tls {
		return "443"
	}
	return "80"
}

// splitHostPort splits a Host value ("name", "name:port", "1.2.3.4:80",
// "[::1]:80", "::1") into a normalized host (see normHost) and a port ("" when
// none). A port must be a number from 1 to 65535.
func splitHostPort(s string) (host, port string, err error) {
	if h, p, e := net.SplitHostPort(s); e == nil {
		n, e := strconv.Atoi(p)
		if e != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
			return "", "", fmt.Errorf("bad port %q", p)
		}
		host, port = h, p
	} else if strings.HasPrefix(s, "[") {
		if !strings.HasSuffix(s, "]") {
			return "", "", errors.New("unclosed [")
		}
		host = s[1 : len(s)-1]
	} else if strings.Count(s, ":") == 1 {
		return "", "", errors.New("bad port")
	} else {
		host = s
	}
	return normHost(host), port, nil
}

// normHost makes equal names compare equal: lower case, without the
// trailing dot of a fully qualified name ("localhost." is "localhost"), an
// IP address in its canonical form (an IPv4-mapped IPv6 address as IPv4).
func normHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip.Unmap().WithZone("").String()
	}
	return h
}

// ClientKey names the client a wrong credential is counted against, from
// a request's RemoteAddr: its IPv4 address, or the /64 of its IPv6 address
// (which one host usually holds whole, so rotating addresses within it
// does not reset the count). An IPv4-mapped IPv6 address counts as IPv4.
func ClientKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		return netip.PrefixFrom(ip, 64).Masked().String()
	}
	return ip.String()
}
