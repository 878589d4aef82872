package policy

import (
	"bytes"
	_ "embed"

	"github.com/portcullis/portcullis"
)

// defaultYAML is the built-in default policy, commented: the file
// `portcullis policy show-default` prints.
//
//go:embed default.yaml
var defaultYAML []byte

// DefaultName names the built-in default policy in messages.
const DefaultName = "the built-in default policy"

// DefaultYAML returns the built-in default policy's file, comments and all:
// the starting point for a policy file of one's own.
func DefaultYAML() []byte { return bytes.Clone(defaultYAML) }

// LoadDefault parses the built-in default policy exactly as Load parses a
// file. Its Source is empty (no file holds it) and its Hash is that of its
// bytes.
func LoadDefault() (*portcullis.Policy, []Warning, error) {
	pol, warns, err := Parse(DefaultName, defaultYAML)
	if err != nil {
		return nil, warns, err
	}
	pol.Source = ""
	return pol, warns, nil
}
