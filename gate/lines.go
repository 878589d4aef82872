package gate

import (
	"context"
	"io"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/internal/jsonlines"
)

// DecideLines reads one JSON request per line of r and writes one JSON
// decision per line to w, as `portcullis decide` does. A line that is not a
// request, or that Decide refuses with an error, ends the run with an error
// naming the line ("line 2: ..."); the decisions before it are written,
// nothing for it. Blank lines are skipped; a line may be as long as
// portcullis.MaxRequestBytes. It stops before the next line once ctx is
// done, and returns nil at the end of r.
func (g *Gate) DecideLines(ctx context.Context, r io.Reader, w io.Writer) error {
	return jsonlines.Answer(ctx, r, w, portcullis.MaxRequestBytes, "decision", func(line []byte) (any, error) {
		call, err := portcullis.DecodeCall(line)
		if err != nil {
			return nil, err
		}
		return g.Decide(ctx, call)
	})
}
