package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
)

// runExplain decides one request without side effects and prints the trace
// as text a person reads (gate.WriteExplanation): the verdict first, then
// every stage.
func runExplain(ctx context.Context, o *explainOptions, pos []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(pos) != 1 {
		return usageError(`explain takes one request, e.g. portcullis explain --policy policy.yaml '{"tool": "delete_element"}'`)
	}
	raw := []byte(pos[0])
	if pos[0] == "-" {
		var err error
		if raw, err = io.ReadAll(io.LimitReader(stdin, portcullis.MaxRequestBytes+1)); err != nil {
			return fmt.Errorf("read request: %w", err)
		}
	}
	call, err := portcullis.DecodeCall(raw)
	if err != nil {
		return usageError("request: %v", err)
	}
	path, err := policyPath(o.policy)
	if err != nil {
		return err
	}
	g, err := loadGate(path, stderr)
	if err != nil {
		return err
	}
	d, err := g.Explain(ctx, call)
	if err != nil {
		return usageError("request: %v", err)
	}
	if !o.json {
		return gate.WriteExplanation(stdout, call, d)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(d)
}
