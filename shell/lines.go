package shell

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/internal/jsonlines"
)

// WithPolicy returns o with what the policy pol adds to it: its
// `shell.rules`, and its own files protected (the policy file, the policy
// document, the validator's rules file).
func (o Options) WithPolicy(pol *portcullis.Policy) Options {
	o.Rules = pol.Shell.Rules
	src := pol.Source
	if abs, err := filepath.Abs(src); err == nil {
		src = abs
	}
	o.ProtectedPaths = append(o.ProtectedPaths, src, pol.PolicyDocument)
	if pol.Validator != nil {
		o.ProtectedPaths = append(o.ProtectedPaths, pol.Validator.Rules)
	}
	return o
}

// ClassifyLines reads one {"command": "..."} JSON object per line of r and
// writes one Classification JSON line per command to w, as `portcullis
// classify` does. A line that is not such an object (unknown fields, a
// missing or non-string command, trailing data) ends the run with an error
// naming the line ("line 2: ..."); the classifications before it are
// written, nothing for it. Blank lines are skipped; a line may be as long
// as portcullis.MaxRequestBytes. It stops before the next line once ctx is
// done, and returns nil at the end of r.
func (c *Classifier) ClassifyLines(ctx context.Context, r io.Reader, w io.Writer) error {
	return jsonlines.Answer(ctx, r, w, portcullis.MaxRequestBytes, "classification", func(line []byte) (any, error) {
		command, err := decodeRequest(line)
		if err != nil {
			return nil, err
		}
		return c.Classify(command), nil
	})
}

// classifyRequest is one line of ClassifyLines's input.
type classifyRequest struct {
	Command *string `json:"command"`
}

// decodeRequest reads {"command": "..."}, strictly.
func decodeRequest(line []byte) (string, error) {
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
