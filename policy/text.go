package policy

import (
	"fmt"
	"io"

	"github.com/portcullis/portcullis"
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
	_, err := fmt.Fprintf(w, "%s: %s, %s, %s\n", path, plural(len(pol.Tools), "tool"), plural(len(pol.Elements), "element"), plural(len(warnings), "warning"))
	return err
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
