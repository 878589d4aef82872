// Package buildinfo says which build of Portcullis is running: the module
// version, the VCS commit, the build date, the Go toolchain and the
// platform (`portcullis version`). It reads what the Go toolchain stamped
// into the binary; the link-time values of a release build are passed in.
package buildinfo

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Info is what `portcullis version` reports.
type Info struct {
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

// Read returns the build information stamped into the binary, with the
// link-time values (version, commit, date; "" when not set) taking
// precedence.
func Read(version, commit, date string) Info {
	b := Info{Version: "(devel)", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		b = b.stamped(bi)
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

// stamped is b with what the toolchain stamped into bi.
func (b Info) stamped(bi *debug.BuildInfo) Info {
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
	return b
}

// WriteJSON writes b as one JSON object.
func (b Info) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(b)
}

// WriteText writes b for people, as `portcullis version` shows it.
func (b Info) WriteText(w io.Writer) error {
	fmt.Fprintln(w, "portcullis "+b.Version)
	if b.Commit != "" {
		c := b.Commit
		if b.Modified {
			c += " (with uncommitted changes)"
		}
		fmt.Fprintln(w, "  commit     "+c)
	}
	if b.CommitTime != "" {
		fmt.Fprintln(w, "  committed  "+b.CommitTime)
	}
	if b.Date != "" {
		fmt.Fprintln(w, "  built      "+b.Date)
	}
	_, err := fmt.Fprintln(w, "  go         "+b.Go+" "+b.Platform)
	return err
}
