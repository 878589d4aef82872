package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/portcullis/portcullis/internal/buildinfo"
	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
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
		return cmdutil.UsageError("version: unexpected argument %q", pos[0])
	}
	b := buildinfo.Read(version, commit, date)
	if asJSON {
		return b.WriteJSON(stdout)
	}
	return b.WriteText(stdout)
}

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version [--json]",
		Short: "The version, commit and build date",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runVersion(asJSON, args, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the build information as one JSON object")
	return cmd
}
