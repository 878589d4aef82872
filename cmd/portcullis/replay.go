package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/replay"
)

// `portcullis policy replay` re-decides the calls recorded in the audit log
// under a new policy (package replay) and prints every decision whose
// outcome or level would change: a table, or JSON lines.

func runPolicyReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("policy replay", stderr, "policy replay --policy NEW.yaml [--since 7d] [--until T] [--state DIR | --store URL] [--json]")
	policyFlag := fs.String("policy", "", "the new policy `file` to replay the recorded calls under (default $PORTCULLIS_POLICY)")
	since := fs.String("since", "", "replay decisions from this `time` (RFC 3339) or this long ago (90m, 24h, 7d); default: the whole log")
	until := fs.String("until", "", "replay decisions before this `time` (RFC 3339) or this long ago")
	asJSON := fs.Bool("json", false, "one JSON object per changed decision, then one summary object")
	every := fs.Int64("progress", 100000, "report progress on stderr every `N` rows (0: never)")
	// The replay reads every row of the log itself, and a damaged page is an
	// error of that scan: SQLite's whole-file quick_check at open would read
	// the file twice.
	sf := stateFlags{perCall: true}
	sf.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("policy replay: unexpected argument %q (the policy goes in --policy)", pos[0])
	}
	path, err := policyPath(*policyFlag)
	if err != nil {
		return err
	}
	now := time.Now()
	from, err := parseWhen(*since, now)
	if err != nil {
		return usageError("--since: %v", err)
	}
	to, err := parseWhen(*until, now)
	if err != nil {
		return usageError("--until: %v", err)
	}
	pol, warnings, err := policy.Load(path)
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	for _, w := range warnings {
		fmt.Fprintln(stderr, "warning: "+w.String())
	}
	if err := sf.mustExist(); err != nil {
		return err
	}
	st, err := sf.open(ctx, cliLogger(stderr))
	if err != nil {
		return err
	}
	defer st.Close()
	dir, err := sf.dir(false)
	if err != nil {
		return err
	}
	// The replaying gates protect what decide's gate protects.
	opts := replay.Options{Since: from, Until: to}
	if exe, err := os.Executable(); err == nil {
		opts.ProtectedPaths = append(opts.ProtectedPaths, exe)
	}
	if dir != "" {
		opts.ProtectedPaths = append(opts.ProtectedPaths, dir)
	}
	if home, err := os.UserHomeDir(); err == nil {
		opts.HomeDir = home
	}
	if *every > 0 {
		opts.ProgressEvery = *every
		opts.OnProgress = func(p replay.Progress) {
			fmt.Fprintf(stderr, "replayed %s (up to row %d), %s so far…\n", plural(p.Scanned, "row"), p.Seq, plural(p.Changed, "change"))
		}
	}

	out := bufio.NewWriterSize(stdout, 64<<10)
	var table *tabwriter.Writer
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetEscapeHTML(false)
		opts.OnChange = func(c *replay.Change) error { return enc.Encode(c) }
	} else {
		table = tabwriter.NewWriter(&trimSpaces{w: out}, 0, 4, 2, ' ', 0)
		rows := 0
		opts.OnChange = func(c *replay.Change) error {
			if rows == 0 {
				fmt.Fprintln(table, "SEQ\tTIME\tAGENT\tSESSION\tTOOL\tOLD\tNEW\tNOTES")
			}
			rows++
			fmt.Fprintf(table, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Seq, c.Time.UTC().Format(time.RFC3339), dash(c.Agent), dash(c.Session),
				c.Tool, decisionCell(c.Old), decisionCell(c.New), strings.Join(changeNotes(c), "; "))
			// Flush in blocks, so a long report streams rather than
			// waiting for the end of the log.
			if rows%500 == 0 {
				return table.Flush()
			}
			return nil
		}
	}
	r, err := replay.New(pol, opts)
	if err != nil {
		return &exitError{code: 2, msg: fmt.Sprintf("%s: %v", path, err)}
	}
	rep, err := r.Run(ctx, st)
	if err != nil {
		return fmt.Errorf("replay the audit log: %w", err)
	}
	sum := &rep.Summary
	if table != nil {
		if err := table.Flush(); err != nil {
			return err
		}
		if sum.Changed > 0 {
			fmt.Fprintln(out)
		}
		printReplaySummary(out, sum)
	} else if err := json.NewEncoder(out).Encode(struct {
		Summary *replay.Summary `json:"summary"`
	}{sum}); err != nil {
		return err
	}
	if err := out.Flush(); err != nil {
		return err
	}
	if sum.Changed > 0 {
		return &exitError{code: 1}
	}
	return nil
}

// mustExist refuses to replay a SQLite audit log that is not there, rather
// than creating an empty store and reporting that nothing would change.
func (s *stateFlags) mustExist() error {
	u, err := s.url()
	if err != nil {
		return err
	}
	if !strings.HasPrefix(u, "sqlite:") {
		return nil
	}
	path := strings.TrimPrefix(strings.TrimPrefix(u, "sqlite://"), "sqlite:")
	if _, err := os.Stat(path); err != nil {
		return &exitError{code: 2, msg: fmt.Sprintf("no audit log to replay: %v (pass --state DIR or --store URL)", err)}
	}
	return nil
}

// decisionCell shows a decision in the table as recorded: "deny DENY
// (ELEMENT_POLICY_VIOLATION, Lock)", "allow CONFIRM_SESSION (granted)".
func decisionCell(d replay.Decision) string {
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

// changeNotes is the NOTES cell of a change: the redacted arguments first.
func changeNotes(c *replay.Change) []string {
	out := c.Notes
	if len(c.Redacted) > 0 {
		out = append([]string{"redacted: " + strings.Join(c.Redacted, ", ")}, out...)
	}
	return out
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

func printReplaySummary(w io.Writer, s *replay.Summary) {
	rows := "no decisions"
	if s.FirstSeq > 0 {
		rows = fmt.Sprintf("rows %d-%d", s.FirstSeq, s.LastSeq)
	}
	fmt.Fprintf(w, "Replayed %s (%s of %s read) under %s: %d would change", plural(s.Replayed, "decision"), rows, plural(s.Scanned, "audit row"), s.Policy, s.Changed)
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
			plural(s.Redacted, "decision"), strings.Join(names, ", "), portcullis.RedactedValue)
	}
	if s.Unjudged > 0 {
		fmt.Fprintf(w, "%s would now go to the validator, which has no recorded verdict for them: shown as if it allowed\n", plural(s.Unjudged, "call"))
	}
	for _, k := range sortedByCount(s.NotReplayed) {
		fmt.Fprintf(w, "%s not replayed: %s\n", plural(s.NotReplayed[k], "decision"), k)
	}
}

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
