package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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

// checkPolicyFile says, for a policy: key whose file is missing, which
// configuration named it and where the relative path led.
func checkPolicyFile(cfgPath, raw, resolved string) error {
	_, err := os.Stat(resolved)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return nil // other faults are the policy loader's to report
	}
	if filepath.IsAbs(raw) {
		return fmt.Errorf("%s: policy: the policy file %s does not exist", cfgPath, resolved)
	}
	return fmt.Errorf("%s: policy: the policy file %s does not exist (%q is relative to the directory of the configuration)", cfgPath, resolved, raw)
}

// checkListen checks the form of a listen address before anything starts.
func checkListen(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return &exitError{code: 2, msg: fmt.Sprintf("listen address %q: the form is HOST:PORT, such as 127.0.0.1:8470 (:8470 for every interface)", addr)}
	}
	return nil
}

// listenError says what to do when the listen address cannot be opened.
func listenError(addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen on %s: the address is in use; a `portcullis serve` may already run there: stop it, or pass another --listen HOST:PORT", addr)
	}
	return fmt.Errorf("listen on %s: %w", addr, err)
}

// checkUpstreamCommands refuses a configuration whose upstream command
// cannot start (not found, or not executable) before anything is served:
// such an upstream would never come up, however often it were retried. A
// command that starts and then fails, and a URL upstream that does not
// answer yet, are retried in the background instead.
func checkUpstreamCommands(cfgPath string, ups []upstreamConfig) error {
	for i, u := range ups {
		if len(u.Command) == 0 {
			continue
		}
		if err := commandStarts(u.Command[0], u.Dir); err != nil {
			return &exitError{code: 2, msg: fmt.Sprintf("%s: upstreams[%d] (%s): %v", cfgPath, i, u.Name, err)}
		}
	}
	return nil
}

// commandStarts says why a command run from dir cannot start, if it
// cannot: not found in $PATH, or a path that is missing or not executable.
func commandStarts(command, dir string) error {
	name := command
	hint := "it is looked up in $PATH: install it, or give its full path"
	if strings.ContainsRune(name, '/') || strings.ContainsRune(name, filepath.Separator) {
		// A path is found from the dir it runs in.
		hint = "a relative path is relative to the upstream's dir, else to where serve runs"
		if dir == "" {
			hint = "a relative path is relative to the current directory"
		}
		if !filepath.IsAbs(name) && dir != "" {
			name = filepath.Join(dir, name)
		}
	}
	if _, err := exec.LookPath(name); err != nil {
		return fmt.Errorf("the command %q cannot start: %v (%s)", command, unwrapExec(err), hint)
	}
	return nil
}

// unwrapExec drops exec's "exec: "name": " prefix, the message names it.
func unwrapExec(err error) error {
	if ee, ok := err.(*exec.Error); ok {
		return ee.Err
	}
	return err
}
