package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/portcullis/portcullis"
	"gopkg.in/yaml.v3"
)

// MaxFileBytes bounds a policy file or a policy test file: 8 MiB.
const MaxFileBytes = 8 << 20

// maxReported bounds the problems one error lists.
const maxReported = 20

// Warning is a problem that does not stop a policy from loading: something
// legal that is probably not what the author meant, or an entry that was
// removed while cleaning a list.
type Warning struct {
	File    string // the file name given to Parse or Load; "" from Validate
	Line    int    // 1-based; 0 when unknown
	Message string // "where: what", e.g. `element "X": gatekeeper.allow[0]: ...`
}

// String returns "file:line: message", leaving out what is unknown.
func (w Warning) String() string {
	return problem{file: w.File, line: w.Line, msg: w.Message}.String()
}

// Load reads and parses the policy file at path. The policy's Source is path
// and its Hash is "sha256:" and the hex SHA-256 of the file's bytes. Relative
// paths in the file (policyDocument, validator.rules) are resolved against
// the file's directory into clean absolute paths.
//
// A file that cannot be read gives the os error, wrapped (errors.Is works).
// A file that does not load gives a *portcullis.Error with code
// INVALID_POLICY whose message lists the problems found, one per line, each
// naming file, line and field. The warnings are returned even then.
func Load(path string) (*portcullis.Policy, []Warning, error) {
	data, err := readFile("policy file", path)
	if err != nil {
		return nil, nil, err
	}
	pol, warns, err := Parse(path, data)
	if err != nil {
		return nil, warns, err
	}
	if err := resolvePaths(pol, filepath.Dir(path)); err != nil {
		return nil, warns, fmt.Errorf("load policy %s: %w", path, err)
	}
	return pol, warns, nil
}

// Parse parses a policy file's contents. name is the file's name, used in
// messages and as the policy's Source. Relative paths in the file are cleaned
// but not resolved (Load resolves them). Errors and warnings are as for Load.
func Parse(name string, data []byte) (*portcullis.Policy, []Warning, error) {
	rep := &report{}
	root := decodeYAML(name, data, rep)
	if root == nil {
		return nil, nil, rep.err()
	}
	pol := parsePolicy(name, root, rep)
	if err := rep.err(); err != nil {
		return nil, rep.warnings(), err
	}
	pol.Source = name
	pol.Hash = hashOf(data)
	return pol, rep.warnings(), nil
}

// Validate checks a policy built in code with the same semantic checks as
// Parse, and cleans its lists the same way (p is modified in place). Messages
// carry no file or line. Zero values whose zero is not meaningful get their
// defaults: Mode (enforce), UnknownTools (confirm), an autonomy's
// RiskTolerance (moderate), the validator's Timeout (10s), Mode (stateless)
// and, when its Scope is entirely empty, Scope.Risks (external-write and
// policy-write), and Approvals.Wait (45s). Fields whose zero is meaningful
// (CanBeElevated, Active, MaxAutonomousSteps) are taken as they are.
//
// An invalid policy gives a *portcullis.Error with code INVALID_POLICY.
func Validate(p *portcullis.Policy) ([]Warning, error) {
	if p == nil {
		return nil, portcullis.Errorf(portcullis.CodeInvalidPolicy, "no policy (nil)")
	}
	rep := &report{}
	c := &checker{pol: p, rep: rep}
	c.run()
	return rep.warnings(), rep.err()
}

// parsePolicy interprets a policy mapping node. Problems go to rep; the
// result is nil when the node could not be read at all.
func parsePolicy(file string, root *yaml.Node, rep *report) *portcullis.Policy {
	p := newParser(file, rep)
	pol := p.policy(root)
	if pol == nil || p.aborted {
		return nil
	}
	c := &checker{pol: pol, rep: rep, file: file, loc: &locator{root: root, bad: p.bad}}
	c.run()
	return pol
}

func hashOf(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// missingFile is the error of a file that does not exist: it says so
// once, where "read X: open X: no such file or directory" said it thrice.
type missingFile struct{ kind, path string }

func (m missingFile) Error() string { return "the " + m.kind + " " + m.path + " does not exist" }

// Is makes errors.Is(err, fs.ErrNotExist) hold.
func (m missingFile) Is(target error) bool { return target == fs.ErrNotExist }

// readFile reads at most MaxFileBytes of a file; kind names it in errors
// ("policy file").
func readFile(kind, path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, missingFile{kind, path}
	}
	if err != nil {
		return nil, err // "open X: permission denied" names the file
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxFileBytes {
		return nil, portcullis.Errorf(portcullis.CodeInvalidPolicy, "%s: file is more than %d bytes (8 MiB), the limit", path, MaxFileBytes)
	}
	return data, nil
}

// resolvePaths makes the policy's relative file paths absolute, relative to dir.
func resolvePaths(pol *portcullis.Policy, dir string) error {
	abs := func(p *string) error {
		if *p == "" || filepath.IsAbs(*p) {
			return nil
		}
		a, err := filepath.Abs(filepath.Join(dir, *p))
		if err != nil {
			return err
		}
		*p = a
		return nil
	}
	if err := abs(&pol.PolicyDocument); err != nil {
		return err
	}
	if pol.Validator != nil {
		return abs(&pol.Validator.Rules)
	}
	return nil
}

// problem is one error or warning: where it is and what is wrong.
type problem struct {
	file  string
	line  int
	where string // e.g. `element "X": gatekeeper.deny[2]`; "" at the top
	msg   string
}

func (p problem) String() string {
	var b strings.Builder
	if p.file != "" {
		b.WriteString(p.file)
		if p.line > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(p.line))
		}
		b.WriteString(": ")
	} else if p.line > 0 {
		b.WriteString("line ")
		b.WriteString(strconv.Itoa(p.line))
		b.WriteString(": ")
	}
	if p.where != "" {
		b.WriteString(p.where)
		b.WriteString(": ")
	}
	b.WriteString(p.msg)
	return b.String()
}

// report collects the problems of one file.
type report struct {
	errs, warns []problem
	// before are lines of another file's error (a policy a test file
	// names), listed first.
	before []string
}

func sortProblems(ps []problem) {
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].line < ps[j].line })
}

// err returns the report's errors as one *portcullis.Error, or nil.
func (r *report) err() error {
	if len(r.errs) == 0 && len(r.before) == 0 {
		return nil
	}
	sortProblems(r.errs)
	lines := slices.Clone(r.before)
	total := len(lines) + len(r.errs)
	for _, p := range r.errs {
		if len(lines) == maxReported {
			break
		}
		lines = append(lines, p.String())
	}
	if total > len(lines) {
		lines = append(lines, fmt.Sprintf("... and %d more problems", total-len(lines)))
	}
	return &portcullis.Error{Code: portcullis.CodeInvalidPolicy, Message: strings.Join(lines, "\n")}
}

func (r *report) warnings() []Warning {
	if len(r.warns) == 0 {
		return nil
	}
	sortProblems(r.warns)
	ws := make([]Warning, len(r.warns))
	for i, p := range r.warns {
		msg := p.msg
		if p.where != "" {
			msg = p.where + ": " + msg
		}
		ws[i] = Warning{File: p.file, Line: p.line, Message: msg}
	}
	return ws
}

// errorLines returns the lines of an INVALID_POLICY error's message, or nil
// when err is something else.
func errorLines(err error) []string {
	var e *portcullis.Error
	if !errors.As(err, &e) || e.Code != portcullis.CodeInvalidPolicy {
		return nil
	}
	return strings.Split(e.Message, "\n")
}
