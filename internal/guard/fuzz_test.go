package guard

import (
	"net/http/httptest"
	"testing"
)

// FuzzHostAndOrigin feeds any Host, Origin and remote address to the
// rules: they never panic, the loopback allow-list never allows a name
// outside it, and an accepted Origin is the request's own or the extra one.
func FuzzHostAndOrigin(f *testing.F) {
	for _, seed := range [][3]string{
		{"127.0.0.1:8470", "http://127.0.0.1:8470", "127.0.0.1:5555"},
		{"[::1]:8470", "http://[::1]:8470", "[::1]:1"},
		{"localhost.", "null", "[fe80::1%eth0]:80"},
		{"evil.example", "https://gate.example.com", "x"},
		{"[", "http://[", ""},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	loop, err := NewSites(nil, []string{"https://gate.example.com"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, host, origin, remote string) {
		ClientKey(remote)
		if loop.HostAllowed(host, false) {
			h, _, err := splitHostPort(host)
			if err != nil || (h != "localhost" && h != "127.0.0.1" && h != "::1") {
				t.Fatalf("the loopback allow-list allowed Host %q (%q, %v)", host, h, err)
			}
		}
		r := httptest.NewRequest("POST", "http://x/", nil)
		r.Host = host
		r.Header.Set("Origin", origin)
		if loop.CheckOrigin(r) == nil {
			got, err := parseOrigin(origin)
			if err != nil {
				t.Fatalf("accepted an Origin %q it cannot parse: %v", origin, err)
			}
			h, p, err := splitHostPort(host)
			if p == "" {
				p = "80"
			}
			own := err == nil && got == (endpoint{"http", h, p})
			if !own && got != (endpoint{"https", "gate.example.com", "443"}) {
				t.Fatalf("accepted Origin %q for Host %q", origin, host)
			}
		}
	})
}
