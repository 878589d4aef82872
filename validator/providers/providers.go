// Package providers builds the validator a policy asks for: the provider
// its `validator.provider` names (the Anthropic Messages API, OpenAI Chat
// Completions or any compatible server, a local command), with the API key
// from the environment variable `validator.apiKeyEnv` names (never from the
// policy), behind package validator's prompts, parsing, retries and budget.
//
// The Anthropic and OpenAI providers run in the program
// portcullis-provider (package validator/remote), so that a binary that
// builds validators does not link their SDKs: it is found beside the
// running executable, then in PATH, unless ProgramEnv names it.
//
// It reads no environment of its own: the caller passes how to look a
// variable up.
package providers

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/validator"
	"github.com/portcullis/portcullis/validator/command"
	"github.com/portcullis/portcullis/validator/remote"
)

// ProgramEnv names the environment variable that, when set, is the path of
// the provider program, instead of looking for it.
const ProgramEnv = "PORTCULLIS_PROVIDER_PROGRAM"

// Getenv looks up an environment variable ("" when it is not set), as
// os.Getenv does.
type Getenv func(name string) string

// New makes the policy's validator, nil when the policy has none. A
// validator that cannot be built is an error: a policy that asks for a
// validator never runs without one.
func New(pol *portcullis.Policy, getenv Getenv, log *slog.Logger) (portcullis.Validator, error) {
	cfg := pol.Validator
	if cfg == nil {
		return nil, nil
	}
	m, err := Model(cfg, getenv)
	if err != nil {
		return nil, fmt.Errorf("validator: %w", err)
	}
	v, err := validator.New(m, validator.Config{
		Mode:           portcullis.ValidationMode(cfg.Mode),
		RulesFile:      cfg.Rules,
		PolicyDocument: pol.PolicyDocument,
		Timeout:        cfg.Timeout,
		PolicyHash:     pol.Hash,
		Logger:         log,
		Budget: validator.Budget{
			PerMinute:  cfg.Budget.PerMinute,
			Burst:      cfg.Budget.Burst,
			Concurrent: cfg.Budget.Concurrent,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("validator: %w", err)
	}
	return v, nil
}

// Model is the provider cfg names, with its API key.
func Model(cfg *portcullis.ValidatorConfig, getenv Getenv) (portcullis.Model, error) {
	key, err := APIKey(cfg.APIKeyEnv, getenv)
	if err != nil {
		return nil, err
	}
	keyEnv := cfg.APIKeyEnv
	if keyEnv == "" {
		keyEnv = "named by validator.apiKeyEnv"
	}
	var m portcullis.Model
	switch cfg.Provider {
	case "anthropic":
		if key == "" {
			return nil, fmt.Errorf("the anthropic provider needs an API key: set the environment variable %s (validator.apiKeyEnv)", keyEnv)
		}
		m, err = remoteModel(cfg, key, getenv)
	case "openai":
		// With a baseURL it speaks to any OpenAI-compatible server
		// (ollama, vLLM, llama.cpp), which may need no key.
		if key == "" && cfg.BaseURL == "" {
			return nil, fmt.Errorf("the openai provider needs an API key: set the environment variable %s (validator.apiKeyEnv), or a baseURL for a local server", keyEnv)
		}
		m, err = remoteModel(cfg, key, getenv)
	case "command":
		m, err = command.New(cfg.Command, command.Options{})
	default:
		return nil, fmt.Errorf("unknown provider %q (want anthropic, openai or command)", cfg.Provider)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// remoteModel is the provider cfg names, asked through the provider
// program.
func remoteModel(cfg *portcullis.ValidatorConfig, key string, getenv Getenv) (portcullis.Model, error) {
	prog, err := Program(getenv)
	if err != nil {
		return nil, fmt.Errorf("the %s provider runs in a program of its own: %w", cfg.Provider, err)
	}
	return remote.New(remote.Options{
		Program: prog,
		Config:  remote.Config{Provider: cfg.Provider, Model: cfg.Model, BaseURL: cfg.BaseURL, Timeout: cfg.Timeout},
		APIKey:  key,
	})
}

// Program finds the provider program: the path ProgramEnv names, else
// portcullis-provider beside the running executable, else in the PATH
// getenv gives. Not finding it is an error that says how to install it.
func Program(getenv Getenv) (string, error) {
	p, _, err := lookup(getenv)
	return p, err
}

// ProgramPaths are the files an agent must not be able to write, because
// the gateway would run them as the provider program: the one Program
// finds and the file a link there leads to, and every place looked at
// before it, where a program put there would be found first next time. Nil
// when there is no program to find.
func ProgramPaths(getenv Getenv) []string {
	p, before, err := lookup(getenv)
	if err != nil {
		return nil
	}
	paths := append(before, p)
	if real, err := filepath.EvalSymlinks(p); err == nil && real != p {
		paths = append(paths, real)
	}
	return paths
}

// lookup is Program, and the places it looked at before the one found.
func lookup(getenv Getenv) (string, []string, error) {
	var before []string
	name := remote.Program
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	if p := getenv(ProgramEnv); p != "" {
		// Absolute: started later, it must be the file checked now.
		abs, err := filepath.Abs(p)
		if err == nil {
			err = executable(abs)
		}
		if err != nil {
			return "", nil, fmt.Errorf("%s=%s: %w", ProgramEnv, p, err)
		}
		return abs, nil, nil
	}
	var looked []string
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		p := filepath.Join(dir, name)
		if executable(p) == nil {
			return p, nil, nil
		}
		before = append(before, p)
		looked = append(looked, "beside "+exe)
	}
	for _, dir := range filepath.SplitList(getenv("PATH")) {
		if dir == "" || !filepath.IsAbs(dir) {
			// A relative PATH entry would find a program by the
			// working directory of the moment.
			continue
		}
		p := filepath.Join(dir, name)
		if executable(p) == nil {
			return p, before, nil
		}
		before = append(before, p)
	}
	looked = append(looked, "in PATH")
	return "", nil, fmt.Errorf("%s is not installed (looked %s): install it with %s, or set %s to its path",
		remote.Program, strings.Join(looked, " and "), remote.Install, ProgramEnv)
}

// executable is nil when path is a file this process may run.
func executable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o111 == 0 {
		return &fs.PathError{Op: "run", Path: path, Err: errors.New("not executable")}
	}
	return nil
}

// APIKey reads the validator's API key from the environment variable env,
// or — the container-secrets convention — from the file named by the same
// variable with _FILE appended. It is "" when env is "" or neither is set.
// The key never comes from the policy file and is never logged.
func APIKey(env string, getenv Getenv) (string, error) {
	if env == "" {
		return "", nil
	}
	if k := strings.TrimSpace(getenv(env)); k != "" {
		return k, nil
	}
	path := getenv(env + "_FILE")
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the API key from %s (%s_FILE): %w", path, env, err)
	}
	return strings.TrimSpace(string(b)), nil
}
