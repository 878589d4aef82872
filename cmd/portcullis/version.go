package main

import (
	"io"

	"github.com/portcullis/portcullis/internal/buildinfo"
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

func runVersion(asJSON bool, pos []string, stdout io.Writer) error {
	if len(pos) > 0 {
		return usageError("version: unexpected argument %q", pos[0])
	}
	b := buildinfo.Read(version, commit, date)
	if asJSON {
		return b.WriteJSON(stdout)
	}
	return b.WriteText(stdout)
}
