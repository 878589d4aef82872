package main

import (
	"fmt"
)

// exampleConfig is the gateway configuration to start from, in the
// repository and in the release archives.
const exampleConfig = "examples/gateway/portcullis.yaml"

// configMissing says which configuration file serve looked for when it is
// not there, and how to name another one.
func configMissing(path string, named bool) error {
	if named {
		return &exitError{code: 2, msg: fmt.Sprintf("no gateway configuration at %s (--config): check the path, or start from %s", path, exampleConfig)}
	}
	return &exitError{code: 2, msg: fmt.Sprintf("no gateway configuration at %s (the default of --config) in this directory: pass --config FILE, or start from %s", path, exampleConfig)}
}
