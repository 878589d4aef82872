package policy

import (
	"fmt"
	"io"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/internal/english"
)

// WriteWarnings writes each warning on a line of its own, as the commands
// show them: "warning: file:line: message".
func WriteWarnings(w io.Writer, warnings []Warning) {
	for _, wn := range warnings {
		fmt.Fprintln(w, "warning: "+wn.String())
	}
}

// WriteLint writes what `portcullis policy lint` shows of the policy pol
// loaded from path with its warnings: each warning, then one line counting
// the policy's tools, elements and warnings.
func WriteLint(w io.Writer, path string, pol *portcullis.Policy, warnings []Warning) error {
	WriteWarnings(w, warnings)
	_, err := fmt.Fprintf(w, "%s: %s, %s, %s\n", path, english.Count(len(pol.Tools), "tool"), english.Count(len(pol.Elements), "element"), english.Count(len(warnings), "warning"))
	return err
}
