package guard

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestHostAllowed(t *testing.T) {
	s, err := NewSites([]string{"gate.example.com", "Console.Example.com:8443", "[fd00::1]:8470", "10.0.0.7"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	loop, err := NewSites(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s     *Sites
		host  string
		tls   bool
		allow bool
	}{
		{s, "gate.example.com", false, true},
		{s, "gate.example.com:1234", false, true},    // a bare name: any port
		{s, "GATE.example.COM.", false, true},        // case and the trailing dot of a FQDN
		{s, "gate.example.com.:8470", false, true},   // trailing dot with a port
		{s, "console.example.com:8443", false, true}, // name:port: that port
		{s, "console.example.com.:8443", false, true},
		{s, "console.example.com:8444", false, false},
		{s, "console.example.com", false, false}, // default port 80 is not 8443
		{s, "[fd00::1]:8470", false, true},
		{s, "[FD00:0:0::1]:8470", false, true}, // one address, two spellings
		{s, "[fd00::1]:8471", false, false},
		{s, "10.0.0.7:99", false, true},
		{s, "[::ffff:10.0.0.7]:99", false, true}, // IPv4-mapped IPv6 is the IPv4 address
		{s, "evil.example.com", false, false},
		{s, "gate.example.com.evil.com", false, false},
		{s, "", false, false},
		{s, "gate.example.com:", false, false},
		{s, "gate.example.com:99999", false, false},
		{s, "gate.example.com:0x50", false, false},
		{loop, "localhost:8470", false, true},
		{loop, "localhost.:8470", false, true},
		{loop, "127.0.0.1:1", false, true},
		{loop, "[::1]:8470", false, true},
		{loop, "[0:0::1]:8470", false, true},
		{loop, "::1", false, true},
		{loop, "127.0.0.2:8470", false, false},
		{loop, "localhost.evil.com", false, false},
		{loop, "rebound.example.com:8470", false, false},
	} {
		if got := c.s.HostAllowed(c.host, c.tls); got != c.allow {
			t.Errorf("HostAllowed(%q) = %v; want %v", c.host, got, c.allow)
		}
	}
	tlsSites, _ := NewSites([]string{"gate.example.com:443"}, nil)
	if !tlsSites.HostAllowed("gate.example.com", true) || tlsSites.HostAllowed("gate.example.com", false) {
		t.Error("a Host without a port should match the rule of its scheme's default port only")
	}
}

func TestNewSitesRefusesBadEntries(t *testing.T) {
	for _, h := range []string{"", "  ", "gate.example.com:x", "http://gate.example.com", "a b", "[::1", "user@host"} {
		if _, err := NewSites([]string{h}, nil); err == nil {
			t.Errorf("NewSites(%q) accepted a bad host", h)
		}
	}
	for _, o := range []string{"gate.example.com", "ftp://gate.example.com", "https://gate.example.com/path", "https://", "https://u:p@gate.example.com"} {
		if _, err := NewSites(nil, []string{o}); err == nil {
			t.Errorf("NewSites(origin %q) accepted a bad origin", o)
		}
	}
}

func TestCheckOrigin(t *testing.T) {
	s, err := NewSites(nil, []string{"https://gate.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	req := func(host, origin string, tls bool) *http.Request {
		r := httptest.NewRequest("POST", "http://"+host+"/mcp", nil)
		r.Host = host
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		if !tls {
			r.TLS = nil
		}
		return r
	}
	for _, c := range []struct {
		host, origin string
		ok           bool
	}{
		{"127.0.0.1:8470", "http://127.0.0.1:8470", true},  // the gateway's own origin
		{"127.0.0.1:8470", "HTTP://127.0.0.1:8470", true},  // scheme case
		{"localhost:8470", "http://localhost.:8470", true}, // trailing dot
		{"[::1]:8470", "http://[0::1]:8470", true},
		{"localhost", "http://localhost:80", true},           // implied port
		{"localhost:8470", "https://gate.example.com", true}, // an extra origin
		{"localhost:8470", "https://gate.example.com:443", true},
		{"127.0.0.1:8470", "http://127.0.0.1:5173", false}, // another port of this host: another origin
		{"127.0.0.1:8470", "http://localhost:8470", false}, // another name of it
		{"127.0.0.1:8470", "http://evil.example.com", false},
		{"127.0.0.1:8470", "http://gate.example.com", false}, // http, not the https origin
		{"127.0.0.1:8470", "https://127.0.0.1:8470", false},  // another scheme: another origin
		{"127.0.0.1:8470", "null", false},
		{"127.0.0.1:8470", "file://", false},
		{"127.0.0.1:8470", "chrome-extension://abc", false},
		{"127.0.0.1:8470", "http://127.0.0.1:8470/x", false},
		{"127.0.0.1:8470", "http://127.0.0.1:8470@evil.com", false},
	} {
		err := s.CheckOrigin(req(c.host, c.origin, false))
		if (err == nil) != c.ok {
			t.Errorf("Host %s, Origin %s: CheckOrigin = %v; want ok=%v", c.host, c.origin, err, c.ok)
		}
	}
	if err := s.CheckOrigin(req("127.0.0.1:8470", "", false)); !errors.Is(err, ErrNoOrigin) {
		t.Errorf("no Origin: CheckOrigin = %v; want ErrNoOrigin", err)
	}
}

func TestClientKey(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:5555":                 "127.0.0.1",
		"10.1.2.3:1":                     "10.1.2.3",
		"[::ffff:10.1.2.3]:1":            "10.1.2.3",
		"[2001:db8:1:2:aaaa::1]:443":     "2001:db8:1:2::/64",
		"[2001:db8:1:2:bbbb::9]:80":      "2001:db8:1:2::/64", // same /64, same client
		"[2001:db8:1:3::1]:80":           "2001:db8:1:3::/64",
		"[fe80::1%eth0]:80":              "fe80::/64",
		"[::1]:8470":                     "::/64",
		"not an address":                 "not an address",
		"2001:db8:1:2:cccc::1":           "2001:db8:1:2::/64", // no port
		"[2001:DB8:1:2:dddd:0:0:1]:1234": "2001:db8:1:2::/64",
	} {
		if got := ClientKey(addr); got != want {
			t.Errorf("ClientKey(%q) = %q; want %q", addr, got, want)
		}
	}
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestFailuresLimitThePersonGuessingOnly(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var reports []Failure
	f := NewFailures(FailureOptions{Burst: 3, Every: 10 * time.Second, Now: clock.Now, Report: func(x Failure) { reports = append(reports, x) }})
	for i := range 3 {
		if f.Fail("api", "10.0.0.1").Limited {
			t.Fatalf("failure %d within the burst was limited", i+1)
		}
	}
	x := f.Fail("api", "10.0.0.1")
	if !x.Limited || !x.FirstLimited || x.RetryAfter <= 0 || x.RetryAfter > 10*time.Second || RetryAfterSeconds(x.RetryAfter) == "0" {
		t.Fatalf("the 4th failure: %+v; want limited (first) with a wait of at most 10s", x)
	}
	if !f.Fail("mcp", "10.0.0.1").Limited {
		t.Error("the allowance is per client, not per entry: the 5th failure through another entry should be limited")
	}
	// Another client is not affected: no lock-out for everyone.
	if f.Fail("console", "10.0.0.2").Limited {
		t.Error("another client was limited by the first one's failures")
	}
	// Only the first limited failure of a run is flagged for the log.
	var firsts, limitedN int
	for _, r := range reports {
		if r.Limited {
			limitedN++
		}
		if r.FirstLimited {
			firsts++
		}
	}
	if limitedN != 2 || firsts != 1 {
		t.Errorf("reports: %d limited, %d first; want 2 and 1: %+v", limitedN, firsts, reports)
	}
	// The allowance comes back with time.
	clock.Add(10 * time.Second)
	if f.Fail("api", "10.0.0.1").Limited {
		t.Error("a failure after the client earned one more attempt was limited")
	}
	if !f.Fail("api", "10.0.0.1").Limited {
		t.Error("the next failure at once should be limited again")
	}
}

func TestFailuresTableIsBounded(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	f := NewFailures(FailureOptions{Burst: 2, Every: time.Minute, MaxClients: 4, Now: clock.Now})
	for i := range 4 {
		f.Fail("api", fmt.Sprintf("10.0.0.%d", i))
	}
	// New clients past the table's size share one allowance.
	f.Fail("api", "10.0.1.1")
	f.Fail("api", "10.0.1.2")
	if !f.Fail("api", "10.0.1.3").Limited {
		t.Error("clients past the table's size should share one allowance")
	}
	if len(f.clients) > 4 {
		t.Errorf("the table holds %d clients; want at most 4", len(f.clients))
	}
	// Once the tracked clients' allowances are whole, they are forgotten
	// and new clients get their own again.
	clock.Add(2 * time.Minute)
	if f.Fail("api", "10.0.2.1").Limited {
		t.Error("a new client after the table emptied was limited")
	}
}

// TestBodyDeadline: a client that trickles its body loses the connection
// once the deadline passes; one that sends it at once is answered, and a
// long answer after the body is not cut by the deadline.
func TestBodyDeadline(t *testing.T) {
	h := BodyDeadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		time.Sleep(600 * time.Millisecond) // longer than the deadline
		fmt.Fprintf(w, "got %d", len(b))
	}), 300*time.Millisecond)
	srv := httptest.NewServer(h)
	defer srv.Close()

	resp, err := http.Post(srv.URL, "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "got 5" {
		t.Fatalf("a whole body: answer %q; want \"got 5\"", b)
	}

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				if _, err := conn.Write([]byte("a")); err != nil {
					return
				}
			}
		}
	}()
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err = io.Copy(io.Discard, bufio.NewReader(conn))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the server still held the connection 30s after the body deadline")
	}
}
