package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadLinkTimeValuesWin(t *testing.T) {
	b := Read("v1.2.3", "0123456789abcdef", "2026-01-02T03:04:05Z")
	if b.Version != "v1.2.3" || b.Commit != "0123456789abcdef" || b.Modified || b.Date != "2026-01-02T03:04:05Z" {
		t.Errorf("Read(link-time values) = %+v; want them", b)
	}
	if b.Go != runtime.Version() || b.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("Read = %+v; want %s on %s/%s", b, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}
}

func TestStamped(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.time", Value: "2026-01-01T00:00:00Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	got := Info{Version: "(devel)", Go: "go1", Platform: "linux/amd64"}.stamped(bi)
	want := Info{Version: "v0.2.0", Commit: "abc", CommitTime: "2026-01-01T00:00:00Z", Modified: true, Go: "go1", Platform: "linux/amd64"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stamped (-want +got):\n%s", diff)
	}
}

func TestWriteText(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    Info
		want string
	}{
		{"devel", Info{Version: "(devel)", Go: "go1.25", Platform: "linux/amd64"},
			"portcullis (devel)\n  go         go1.25 linux/amd64\n"},
		{"release", Info{Version: "v1.2.3", Commit: "abc", Modified: true, CommitTime: "t0", Date: "d0", Go: "go1.25", Platform: "darwin/arm64"},
			"portcullis v1.2.3\n  commit     abc (with uncommitted changes)\n  committed  t0\n  built      d0\n  go         go1.25 darwin/arm64\n"},
	} {
		var sb strings.Builder
		if err := tc.b.WriteText(&sb); err != nil || sb.String() != tc.want {
			t.Errorf("WriteText(%s) = %q, %v; want %q", tc.name, sb.String(), err, tc.want)
		}
	}
}

func TestWriteJSON(t *testing.T) {
	var sb strings.Builder
	b := Info{Version: "v1.0.0-<rc>", Go: "go1.25", Platform: "linux/amd64"}
	if err := b.WriteJSON(&sb); err != nil {
		t.Fatal(err)
	}
	if want := `{"version":"v1.0.0-<rc>","go":"go1.25","platform":"linux/amd64"}` + "\n"; sb.String() != want {
		t.Errorf("WriteJSON = %q; want %q", sb.String(), want)
	}
}
