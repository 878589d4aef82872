package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Set at link time by release builds, e.g.
//
//	go build -ldflags "-X main.version=v0.2.0 -X main.commit=$(git rev-parse HEAD) -X main.date=$(date -u +%FT%TZ)" ./cmd/portcullis
//
// (.goreleaser.yaml does this). Left empty, `portcullis version` reports
// what the Go toolchain stamped into the binary: the module version
// (`go install ...@v0.2.0` stamps the tag; a build in a clone stamps a
// pseudo-version), the VCS commit and its time.
var (
	version string
	commit  string
	date    string
)

// buildInfo is what `portcullis version` reports.
type buildInfo struct {
	// Version is the module version: a tag, a pseudo-version, or "(devel)".
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from ("" when unknown).
	Commit string `json:"commit,omitempty"`
	// Modified says the working tree had uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// Date is when the binary was built (release builds), else "".
	Date string `json:"date,omitempty"`
	// CommitTime is the commit's time, as the toolchain stamped it.
	CommitTime string `json:"commitTime,omitempty"`
	Go         string `json:"go"`
	Platform   string `json:"platform"`
}

// currentBuild reads the build information stamped into the binary, with
// the link-time values taking precedence.
func currentBuild() buildInfo {
	b := buildInfo{Version: "(devel)", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" {
			b.Version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.time":
				b.CommitTime = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if version != "" {
		b.Version = version
	}
	if commit != "" {
		b.Commit, b.Modified = commit, false
	}
	if date != "" {
		b.Date = date
	}
	return b
}

func runVersion(o *versionOptions, pos []string, stdout io.Writer) error {
	var err error
	if len(pos) > 0 {
		return usageError("version: unexpected argument %q", pos[0])
	}
	b := currentBuild()
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(b)
	}
	fmt.Fprintln(stdout, "portcullis "+b.Version)
	if b.Commit != "" {
		c := b.Commit
		if b.Modified {
			c += " (with uncommitted changes)"
		}
		fmt.Fprintln(stdout, "  commit     "+c)
	}
	if b.CommitTime != "" {
		fmt.Fprintln(stdout, "  committed  "+b.CommitTime)
	}
	if b.Date != "" {
		fmt.Fprintln(stdout, "  built      "+b.Date)
	}
	_, err = fmt.Fprintln(stdout, "  go         "+b.Go+" "+b.Platform)
	return err
}
