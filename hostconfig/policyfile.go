package hostconfig

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
)

// stampPrefix starts the last line of a policy file that `portcullis
// init` wrote: the digest of everything above it. While the digest
// matches, nobody has edited the file, and init may replace it.
const stampPrefix = "# portcullis init: unedited while this digest matches: "

// Stamp returns content with the stamp line that marks it as written by
// init and not edited since.
func Stamp(content []byte) []byte {
	out := bytes.Clone(content)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	sum := sha256.Sum256(out)
	return append(out, []byte(stampPrefix+"sha256:"+hex.EncodeToString(sum[:])+"\n")...)
}

// Unedited reports whether content is a file init wrote that nobody has
// edited since: its stamp line matches what is above it.
func Unedited(content []byte) bool {
	body := bytes.TrimSuffix(content, []byte("\n"))
	i := bytes.LastIndexByte(body, '\n')
	last := string(body[i+1:])
	if !strings.HasPrefix(last, stampPrefix) {
		return false
	}
	return bytes.Equal(Stamp(content[:i+1]), content)
}

// PolicyOutcome is what WritePolicy did.
type PolicyOutcome int

// The outcomes of WritePolicy.
const (
	PolicyCreated   PolicyOutcome = iota // there was no file
	PolicyUnchanged                      // the file already says this
	PolicyReplaced                       // init's own unedited file, or --force: replaced, the old one kept as .bak
	PolicyKept                           // a person edited the file: kept; Diff says what init would write
)

// PolicyWrite is the result of WritePolicy.
type PolicyWrite struct {
	Outcome PolicyOutcome
	// Diff is a unified diff from the file on disk to what init would
	// write, when the file was kept or replaced.
	Diff string
}

// WritePolicy writes content (stamped) to path, unless a person edited the
// file there: a file init wrote and nobody changed since is replaced; an
// edited one (or one init did not write) is kept unless force, and the
// result carries the difference either way. A replaced file is kept as
// <path>.bak. The file is created 0600: a policy says what an agent may
// do, and only its owner should change it.
func WritePolicy(path string, content []byte, force bool) (PolicyWrite, error) {
	want := Stamp(content)
	old, mode, err := readForUpdate(path)
	if err != nil {
		return PolicyWrite{}, err
	}
	if old == nil {
		if _, err := writeWithBackup(path, nil, want, 0o600); err != nil {
			return PolicyWrite{}, err
		}
		return PolicyWrite{Outcome: PolicyCreated}, nil
	}
	if bytes.Equal(old, want) {
		return PolicyWrite{Outcome: PolicyUnchanged}, nil
	}
	diff, err := unifiedDiff(path, old, want)
	if err != nil {
		return PolicyWrite{}, err
	}
	if !force && !Unedited(old) {
		return PolicyWrite{Outcome: PolicyKept, Diff: diff}, nil
	}
	if _, err := writeWithBackup(path, old, want, mode); err != nil {
		return PolicyWrite{}, err
	}
	return PolicyWrite{Outcome: PolicyReplaced, Diff: diff}, nil
}

func unifiedDiff(path string, old, updated []byte) (string, error) {
	return difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A:        difflib.SplitLines(string(old)),
		B:        difflib.SplitLines(string(updated)),
		FromFile: path,
		ToFile:   path + " (portcullis init)",
		Context:  2,
	})
}

// StarterHeader is the comment that opens a policy init writes.
func StarterHeader(command string) []byte {
	return fmt.Appendf(nil, `# Written by %s. This file is yours: edit it freely.
# `+"`portcullis init`"+` replaces it only while it is exactly as written (see the
# last line); once you change it, init keeps your file and shows what it would
# have written (--force replaces it, keeping the old one as .bak).
# Check it with: portcullis policy lint --strict FILE

`, command)
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
