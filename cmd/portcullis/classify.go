package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/shell"
)

const classifyHelp = "classify [--policy FILE] [-- COMMAND WORDS...]"

// runClassify classifies shell commands without running them: the words
// after -- as one command, or else one {"command": "..."} JSON object per
// line of stdin. It prints one Classification JSON line per command. A
// malformed line stops the run with exit status 2 and a message naming the
// line; nothing is printed for it.
func runClassify(ctx context.Context, o *classifyOptions, args []string, dashAt int, stdin io.Reader, stdout, stderr io.Writer) error {
	// The words after -- are the command; nothing may stand before it.
	dashes := dashAt >= 0
	if dashAt > 0 || (!dashes && len(args) > 0) {
		return usageError("classify: unexpected argument %q (put the command after --: portcullis %s)", args[0], classifyHelp)
	}
	words := args
	if dashes && len(words) == 0 {
		return usageError("classify: no command after --")
	}
	c, err := newShellClassifier(o.policy, stderr)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(stdout)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	if dashes {
		if err := enc.Encode(c.Classify(strings.Join(words, " "))); err != nil {
			return fmt.Errorf("write classification: %w", err)
		}
		return out.Flush()
	}
	return classifyLines(ctx, c, stdin, out, enc)
}

// newShellClassifier builds the classifier: the built-in knowledge, the
// policy's shell rules when there is a policy, and Portcullis's own files
// (the policy and the documents it names, the state directory, this
// binary) protected.
func newShellClassifier(policyFlag string, stderr io.Writer) (*shell.Classifier, error) {
	opts := shell.Options{}
	if home, err := os.UserHomeDir(); err == nil {
		opts.Home = home
	}
	if dir, err := (&stateFlags{}).dir(false); err == nil {
		opts.ProtectedPaths = append(opts.ProtectedPaths, dir)
	}
	if exe, err := os.Executable(); err == nil {
		opts.ProtectedPaths = append(opts.ProtectedPaths, exe)
	}
	path := policyFlag
	if path == "" {
		path = strings.TrimSpace(os.Getenv("PORTCULLIS_POLICY"))
	}
	if path != "" {
		pol, warnings, err := policy.Load(path)
		if err != nil {
			return nil, &exitError{code: 2, msg: err.Error()}
		}
		for _, w := range warnings {
			fmt.Fprintln(stderr, "warning: "+w.String())
		}
		opts.Rules = pol.Shell.Rules
		opts.ProtectedPaths = append(opts.ProtectedPaths, absPath(path), pol.PolicyDocument)
		if pol.Validator != nil {
			opts.ProtectedPaths = append(opts.ProtectedPaths, pol.Validator.Rules)
		}
	}
	c, err := shell.New(opts)
	if err != nil {
		return nil, &exitError{code: 2, msg: fmt.Sprintf("%s: %v", path, err)}
	}
	return c, nil
}

func absPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// classifyRequest is one line of `portcullis classify`'s input.
type classifyRequest struct {
	Command *string `json:"command"`
}

func classifyLines(ctx context.Context, c *shell.Classifier, stdin io.Reader, out *bufio.Writer, enc *json.Encoder) error {
	in := bufio.NewReaderSize(stdin, 64<<10)
	fail := func(lineNo int, err error) error {
		if ferr := out.Flush(); ferr != nil {
			return ferr
		}
		return &exitError{code: 2, msg: fmt.Sprintf("line %d: %v", lineNo, err)}
	}
	for lineNo := 1; ; lineNo++ {
		if err := ctx.Err(); err != nil {
			return errors.Join(err, out.Flush())
		}
		line, err := readLine(in)
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return out.Flush()
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fail(lineNo, err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		command, err := decodeClassifyRequest(line)
		if err != nil {
			return fail(lineNo, err)
		}
		if err := enc.Encode(c.Classify(command)); err != nil {
			return fmt.Errorf("write classification: %w", err)
		}
		// Flush when no more input is waiting, so an interactive caller
		// gets each answer at once.
		if in.Buffered() == 0 {
			if err := out.Flush(); err != nil {
				return fmt.Errorf("write classification: %w", err)
			}
		}
	}
}

// decodeClassifyRequest reads {"command": "..."}, strictly: unknown fields,
// a missing or non-string command and trailing data are errors.
func decodeClassifyRequest(line []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var req classifyRequest
	if err := dec.Decode(&req); err != nil {
		return "", fmt.Errorf("not a classify request (want {\"command\": \"...\"}): %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", errors.New("unexpected data after the request object")
	}
	if req.Command == nil {
		return "", errors.New(`missing "command" (want {"command": "..."})`)
	}
	return *req.Command, nil
}
