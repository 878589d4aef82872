package replay

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/internal/english"
)

// Printer writes a replay as `portcullis policy replay` shows it: each
// change as it is found (its Change method is an Options.OnChange), then
// the summary. For people, a table with a header before the first change,
// then the summary's text (Summary.WriteText); for programs, one JSON
// object per change, then {"summary": {...}}.
type Printer struct {
	out   *bufio.Writer
	enc   *json.Encoder     // JSON lines; nil for the table
	table *tabwriter.Writer // the table; nil for JSON lines
	rows  int
}

// NewPrinter returns a Printer that writes to w: JSON lines when asJSON,
// otherwise the table. Nothing is sure to reach w before Summary.
func NewPrinter(w io.Writer, asJSON bool) *Printer {
	p := &Printer{out: bufio.NewWriterSize(w, 64<<10)}
	if asJSON {
		p.enc = json.NewEncoder(p.out)
		p.enc.SetEscapeHTML(false)
	} else {
		p.table = tabwriter.NewWriter(&trimSpaces{w: p.out}, 0, 4, 2, ' ', 0)
	}
	return p
}

// Change writes one change.
func (p *Printer) Change(c *Change) error {
	if p.enc != nil {
		return p.enc.Encode(c)
	}
	if p.rows == 0 {
		fmt.Fprintln(p.table, "SEQ\tTIME\tAGENT\tSESSION\tTOOL\tOLD\tNEW\tNOTES")
	}
	p.rows++
	fmt.Fprintf(p.table, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Seq, c.Time.UTC().Format(time.RFC3339), dash(c.Agent), dash(c.Session),
		c.Tool, c.Old, c.New, strings.Join(c.notes(), "; "))
	// Flush in blocks, so a long report streams rather than waiting for
	// the end of the log.
	if p.rows%500 == 0 {
		return p.table.Flush()
	}
	return nil
}

// Summary writes the summary s after the changes, and flushes.
func (p *Printer) Summary(s *Summary) error {
	if p.enc != nil {
		// The summary escapes HTML characters, as it always has.
		if err := json.NewEncoder(p.out).Encode(struct {
			Summary *Summary `json:"summary"`
		}{s}); err != nil {
			return err
		}
	} else {
		if err := p.table.Flush(); err != nil {
			return err
		}
		if s.Changed > 0 {
			fmt.Fprintln(p.out)
		}
		s.WriteText(p.out)
	}
	return p.out.Flush()
}

// Write replays log under pol with opts, as `portcullis policy replay`
// does: each change written to w as it is found, then the summary (a
// Printer's; opts.OnChange is its). It returns the summary. Its errors name
// what failed: the policy the gate refuses ("SOURCE: ..."), reading the log
// ("replay the audit log: ..."), or writing.
func Write(ctx context.Context, pol *portcullis.Policy, log Log, opts Options, w io.Writer, asJSON bool) (*Summary, error) {
	p := NewPrinter(w, asJSON)
	opts.OnChange = p.Change
	r, err := New(pol, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pol.Source, err)
	}
	rep, err := r.Run(ctx, log)
	if err != nil {
		return nil, fmt.Errorf("replay the audit log: %w", err)
	}
	return &rep.Summary, p.Summary(&rep.Summary)
}

// String shows a decision as the table does, as recorded: "deny DENY
// (ELEMENT_POLICY_VIOLATION, Lock)", "allow CONFIRM_SESSION (granted)".
func (d Decision) String() string {
	s := string(d.Outcome) + " " + d.Level.String()
	var why []string
	if d.Code != "" && d.Code != portcullis.CodeConfirmationRequired {
		why = append(why, string(d.Code))
	}
	if d.Source == portcullis.SourceSessionGrant {
		why = append(why, "granted")
	}
	if d.SourceElement != "" {
		why = append(why, d.SourceElement)
	}
	if d.Source == portcullis.SourceMode {
		why = append(why, "mode")
	}
	if len(why) > 0 {
		s += " (" + strings.Join(why, ", ") + ")"
	}
	return s
}

// notes is the NOTES cell of a change: the redacted arguments first.
func (c *Change) notes() []string {
	out := c.Notes
	if len(c.Redacted) > 0 {
		out = append([]string{"redacted: " + strings.Join(c.Redacted, ", ")}, out...)
	}
	return out
}

// String says where a replay has got to, as the command reports it on
// stderr.
func (p Progress) String() string {
	return fmt.Sprintf("replayed %s (up to row %d), %s so far…", english.Count(p.Scanned, "row"), p.Seq, english.Count(p.Changed, "change"))
}

// WriteText writes the summary for people: what was replayed and how much
// would change, the count of each transition (most frequent first), and
// what the replay could not know — redacted arguments, calls newly sent to
// the validator, decisions not replayed and why.
func (s *Summary) WriteText(w io.Writer) {
	rows := "no decisions"
	if s.FirstSeq > 0 {
		rows = fmt.Sprintf("rows %d-%d", s.FirstSeq, s.LastSeq)
	}
	fmt.Fprintf(w, "Replayed %s (%s of %s read) under %s: %d would change", english.Count(s.Replayed, "decision"), rows, english.Count(s.Scanned, "audit row"), s.Policy, s.Changed)
	if s.Changed > 0 {
		fmt.Fprintf(w, " (%d stricter, %d looser", s.Stricter, s.Looser)
		if s.Validator > 0 {
			fmt.Fprintf(w, ", %d newly judged by the validator", s.Validator)
		}
		fmt.Fprint(w, ")")
	}
	fmt.Fprintln(w)
	for _, k := range sortedByCount(s.ByChange) {
		fmt.Fprintf(w, "  %6d  %s\n", s.ByChange[k], k)
	}
	if s.Redacted > 0 {
		names := sortedByCount(s.RedactedArgs)
		for i, n := range names {
			names[i] = fmt.Sprintf("%s ×%d", n, s.RedactedArgs[n])
		}
		fmt.Fprintf(w, "%s had redacted arguments (%s): they were replayed with %q in their place, so a redacted shell command or path was not classified again\n",
			english.Count(s.Redacted, "decision"), strings.Join(names, ", "), portcullis.RedactedValue)
	}
	if s.Unjudged > 0 {
		fmt.Fprintf(w, "%s would now go to the validator, which has no recorded verdict for them: shown as if it allowed\n", english.Count(s.Unjudged, "call"))
	}
	for _, k := range sortedByCount(s.NotReplayed) {
		fmt.Fprintf(w, "%s not replayed: %s\n", english.Count(s.NotReplayed[k], "decision"), k)
	}
}

// sortedByCount returns the keys of m, the highest count first, ties in
// alphabetical order.
func sortedByCount(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	return keys
}

// trimSpaces drops the spaces at the ends of lines: the padding tabwriter
// leaves after a last column that is empty.
type trimSpaces struct {
	w      io.Writer
	spaces int
}

func (t *trimSpaces) Write(p []byte) (int, error) {
	out := make([]byte, 0, len(p))
	for _, c := range p {
		switch c {
		case ' ':
			t.spaces++
			continue
		case '\n':
			t.spaces = 0
		default:
			for ; t.spaces > 0; t.spaces-- {
				out = append(out, ' ')
			}
		}
		out = append(out, c)
	}
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
