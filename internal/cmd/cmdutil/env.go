// Package cmdutil is what Portcullis's command packages (internal/cmd/...)
// share: the environment they are given, the errors that carry an exit
// status, the flags many commands take (state, people's channels,
// observability, witnesses), the policy a command names and the gate it
// builds from it, and the conventions of the command line on top of
// spf13/cobra.
//
// The command layer is cmd/portcullis and internal/cmd: only it reads
// flags and the environment. Its packages read the process's environment
// only through an Env, which cmd/portcullis fills from the process and a
// test fills by hand; nothing here calls os.Getenv. cmdutil holds no
// command of its own, and the domain packages never import it.
package cmdutil

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/portcullis/portcullis/hostconfig"
)

// Env is what a command may know of the process it runs in. A nil
// function stands for something the process does not have: no variable
// is set, there is no home directory, no interrupt ever comes.
type Env struct {
	// LookupEnv reads an environment variable (os.LookupEnv).
	LookupEnv func(key string) (string, bool)
	// HomeDir, ConfigDir, WorkDir and Executable are the user's home and
	// configuration directories, the working directory and this binary
	// (os.UserHomeDir, os.UserConfigDir, os.Getwd, os.Executable).
	HomeDir, ConfigDir, WorkDir, Executable func() (string, error)
	// HostConfig is where the agent clients keep their files
	// (hostconfig.FromOS).
	HostConfig func() (hostconfig.Env, error)
	// Interrupts delivers the signals that stop serve and mcp, counted
	// from the call; stop ends the delivery (server.UntilStopped reads
	// each one: a second Ctrl-C means something else than the first).
	Interrupts func() (signals <-chan os.Signal, stop func())
}

// errUnknown is the error of what the Env does not know.
var errUnknown = errors.New("not known in this environment")

// Getenv is the variable's value, "" when it is not set.
func (e *Env) Getenv(key string) string {
	if e.LookupEnv == nil {
		return ""
	}
	v, _ := e.LookupEnv(key)
	return v
}

// Home is the user's home directory.
func (e *Env) Home() (string, error) { return call(e.HomeDir) }

// UserConfigDir is the user's configuration directory.
func (e *Env) UserConfigDir() (string, error) { return call(e.ConfigDir) }

// Exe is this binary's path.
func (e *Env) Exe() (string, error) { return call(e.Executable) }

// Dir is the working directory, "" when it is not known.
func (e *Env) Dir() string {
	wd, err := call(e.WorkDir)
	if err != nil {
		return ""
	}
	return wd
}

// Hosts is where the agent clients keep their files.
func (e *Env) Hosts() (hostconfig.Env, error) {
	if e.HostConfig == nil {
		return hostconfig.Env{}, errUnknown
	}
	return e.HostConfig()
}

// WatchInterrupts starts delivering the signals that stop a long-running
// command.
func (e *Env) WatchInterrupts() (<-chan os.Signal, func()) {
	if e.Interrupts == nil {
		return nil, func() {}
	}
	return e.Interrupts()
}

func call(f func() (string, error)) (string, error) {
	if f == nil {
		return "", errUnknown
	}
	return f()
}

// StaticEnv is an Env of fixed variables and directories, for running a
// command in process without touching the process's own: home is the
// home directory (its .config the configuration directory) and the
// working directory; no executable, no interrupts.
func StaticEnv(vars map[string]string, home string) *Env {
	dir := func(d string) func() (string, error) { return func() (string, error) { return d, nil } }
	return &Env{
		LookupEnv: func(key string) (string, bool) { v, ok := vars[key]; return v, ok },
		HomeDir:   dir(home), ConfigDir: dir(filepath.Join(home, ".config")), WorkDir: dir(home),
	}
}

// Abs is path made absolute against the working directory, as
// filepath.Abs makes it against the process's.
func (e *Env) Abs(path string) (string, error) {
	if filepath.IsAbs(path) {
		return filepath.Clean(path), nil
	}
	wd, err := call(e.WorkDir)
	if err != nil {
		return "", err
	}
	return filepath.Join(wd, path), nil
}
