package english

import "testing"

func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0 upstreams"}, {1, "1 upstream"}, {2, "2 upstreams"}, {-1, "-1 upstreams"}, {1 << 40, "1099511627776 upstreams"}} {
		if got := Count(c.n, "upstream"); got != c.want {
			t.Errorf("Count(%d) = %q; want %q", c.n, got, c.want)
		}
	}
	if got := Count(1, "call"); got != "1 call" {
		t.Errorf("Count(int 1) = %q; want \"1 call\"", got)
	}
}
