package main

import (
	"io"

	"github.com/portcullis/portcullis/policydiff"
)

// runPolicyDiff prints the semantic difference between two policy files.
// Exit 0 when they decide alike, 1 when they differ (like diff), 2 when one
// does not load.
func runPolicyDiff(o *policyDiffOptions, pos []string, stdout io.Writer) error {
	if len(pos) != 2 {
		return usageError("policy diff takes two policy files: OLD NEW")
	}
	d, err := policydiff.CompareFiles(pos[0], pos[1])
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	if o.json {
		err = d.WriteJSON(stdout)
	} else {
		err = d.WriteText(stdout, o.all)
	}
	if err != nil {
		return err
	}
	if !d.Equal {
		return &exitError{code: 1}
	}
	return nil
}
