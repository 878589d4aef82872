package hostconfig

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/portcullis/portcullis/policy"
)

// What `portcullis init` and `portcullis doctor` do with the pieces of
// this package, and how they tell a person what they did.

// Setup is what `portcullis init CLIENT` is asked to do: the hook or the
// MCP wrapper of Client, under Policy (or a starter policy init writes).
type Setup struct {
	Client  Client
	Binary  string // the absolute path of the portcullis binary the client runs
	Project string // the project directory (absolute); "" for the user's files
	Policy  string // an existing policy file; "" writes the starter policy
	Force   bool   // replace a starter policy a person edited
	State   string // the hook's --state, or ""
	Hold    bool   // the hook's --hold
}

// Prepare returns s with its policy file and state directory made
// absolute, or says why it cannot be done before anything is written: a
// scope the client has no configuration file in, a policy that does not
// load.
func (e Env) Prepare(s Setup) (Setup, error) {
	if _, err := e.SettingsFile(s.Client, scopeOf(s.Project), s.Project); err != nil {
		return s, err
	}
	var err error
	if s.Policy != "" {
		if s.Policy, err = filepath.Abs(s.Policy); err != nil {
			return s, err
		}
		if _, _, err := policy.Load(s.Policy); err != nil {
			return s, fmt.Errorf("--policy: %w", err)
		}
	}
	if s.State != "" {
		if s.State, err = filepath.Abs(s.State); err != nil {
			return s, err
		}
	}
	return s, nil
}

// scopeOf is the scope of a project directory: the user's files for "".
func scopeOf(project string) Scope {
	if project != "" {
		return ProjectScope
	}
	return UserScope
}

// policyPath is where init keeps a policy file named name (policy.yaml, or
// an MCP server's NAME.yaml): the user's configuration directory, or the
// project's .portcullis directory.
func (e Env) policyPath(project, name string) string {
	if project != "" {
		return filepath.Join(project, ".portcullis", name)
	}
	return filepath.Join(e.PolicyDir(), name)
}

// starterPolicy is the built-in default policy under init's header.
func starterPolicy() []byte {
	return append(StarterHeader("portcullis init"), policy.DefaultYAML()...)
}

// WriteStarter writes content as the policy file at path (unless a person
// edited the one there, see WritePolicy) and tells w what happened. The
// content must load as a policy.
func WriteStarter(w io.Writer, path string, content []byte, force bool) error {
	if _, _, err := policy.Parse(path, content); err != nil {
		return fmt.Errorf("the starter policy does not load: %w", err)
	}
	res, err := WritePolicy(path, content, force)
	if err != nil {
		return err
	}
	switch res.Outcome {
	case PolicyCreated:
		fmt.Fprintf(w, "policy: wrote %s (the built-in default policy, commented: edit it to taste)\n", path)
	case PolicyUnchanged:
		fmt.Fprintf(w, "policy: %s is up to date\n", path)
	case PolicyReplaced:
		fmt.Fprintf(w, "policy: replaced %s (the previous file is %s.bak):\n%s", path, path, res.Diff)
	case PolicyKept:
		fmt.Fprintf(w, "policy: kept %s: it was edited since init wrote it. What init would write instead:\n%s", path, res.Diff)
		fmt.Fprintln(w, "  (run again with --force to replace it; yours is then kept as .bak)")
	}
	return nil
}

// Protect puts Portcullis in front of s.Client (as Prepare returned it):
// the policy (the one named,
// or the starter policy written), then the hook installed or the client's
// MCP servers wrapped. It tells w each step.
func (e Env) Protect(w io.Writer, s Setup) error {
	polPath := s.Policy
	if polPath != "" {
		fmt.Fprintf(w, "policy: %s\n", polPath)
	} else {
		polPath = e.policyPath(s.Project, "policy.yaml")
		if err := WriteStarter(w, polPath, starterPolicy(), s.Force); err != nil {
			return err
		}
	}
	var (
		res Installed
		err error
	)
	scope := scopeOf(s.Project)
	if s.Client.HookInstallable() {
		res, err = e.InstallHook(Hook{Client: s.Client, Scope: scope, Project: s.Project,
			Command: HookCommand(s.Binary, s.Client, polPath, s.State, s.Hold), Hold: s.Hold})
	} else {
		res, err = e.WrapMCP(Wrap{Client: s.Client, Scope: scope, Project: s.Project,
			Prefix: WrapperPrefix(s.Binary, polPath, string(s.Client))})
	}
	if err != nil {
		return err
	}
	res.WriteText(w, s.Client, !s.Client.HookInstallable())
	if !s.Client.HookInstallable() {
		fmt.Fprintf(w, "  to classify a server's tools instead of asking for each unknown one: portcullis init mcp --client %s -- SERVER...\n", s.Client)
	}
	return nil
}

// ServerSetup is what `portcullis init mcp` is asked to do, its input
// already checked: classify the tools of the MCP server Command into a
// policy of its own named Name, and add it to Client's configuration
// behind the wrapper ("" Client: print the wrapped command instead).
type ServerSetup struct {
	Name    string
	Command []string
	Client  Client // "" or a client that is not Hooked
	Binary  string
	Project string
	Force   bool
}

// ProtectServer starts the server once to list its tools, writes their
// classification into a policy of its own (the starter policy plus one
// entry per tool) for a person to review, and wraps the server in the
// client's configuration, or prints how to. It tells w each step; the
// server's own stderr goes to stderr.
func (e Env) ProtectServer(ctx context.Context, w, stderr io.Writer, s ServerSetup) error {
	fmt.Fprintf(w, "starting %s to list its tools...\n", strings.Join(s.Command, " "))
	tools, err := ListTools(ctx, s.Command, stderr)
	if err != nil {
		return err
	}
	classified := ClassifyTools(tools)
	base := starterPolicy()
	have, err := ToolNames(base)
	if err != nil {
		return err
	}
	content, err := InsertTools(base, ToolsBlock(s.Name, classified, have))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: %d tools, classified from their names and annotations:\n", s.Name, len(classified))
	for _, c := range classified {
		fmt.Fprintf(w, "  %-28s %-7s %s\n", c.Name, c.Endpoint, c.Why)
	}
	polPath := e.policyPath(s.Project, s.Name+".yaml")
	if err := WriteStarter(w, polPath, content, s.Force); err != nil {
		return err
	}
	fmt.Fprintf(w, "REVIEW %s: it is what the gate trusts; the server's annotations are only its own claims.\n", polPath)
	if s.Client == "" {
		prefix := WrapperPrefix(s.Binary, polPath, "")
		line, err := ShellJoin(append(append(prefix, "--name", s.Name, "--"), s.Command...))
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "run the server behind the gate in your client's configuration as:\n  %s\n", line)
		return nil
	}
	res, err := e.WrapMCP(Wrap{Client: s.Client, Scope: scopeOf(s.Project), Project: s.Project,
		Prefix: WrapperPrefix(s.Binary, polPath, string(s.Client)),
		Add:    &Server{Name: s.Name, Command: s.Command[0], Args: s.Command[1:]}})
	if err != nil {
		return err
	}
	res.WriteText(w, s.Client, true)
	return nil
}

// WriteText tells w what was installed for client (the MCP wrapper when
// wrapped, else the hook), as init shows it.
func (res Installed) WriteText(w io.Writer, client Client, wrapped bool) {
	verb := "installed"
	if !res.Changed {
		verb = "already installed"
	}
	what := "hook"
	if wrapped {
		what = "MCP wrapper"
	}
	fmt.Fprintf(w, "%s: %s %s in %s (previous files kept as .bak)\n  %s\n", client, what, verb, strings.Join(res.Files, " and "), res.Command)
	for _, n := range res.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

// Report checks the clients (CheckWith) and writes what it found, as one
// JSON array or as text for people. It returns how many findings are not
// Protected, of how many.
func (e Env) Report(ctx context.Context, w io.Writer, project string, only []Client, asJSON bool, probes Probes) (bad, total int, err error) {
	findings := e.CheckWith(ctx, project, only, probes)
	for _, f := range findings {
		if f.Status != Protected {
			bad++
		}
	}
	if asJSON {
		if findings == nil {
			findings = []Finding{} // [], not null
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return bad, len(findings), enc.Encode(findings)
	}
	fmt.Fprintln(w, "doctor:")
	if len(findings) == 0 {
		names := ClientNames()
		if len(only) > 0 {
			names = names[:0]
			for _, c := range only {
				names = append(names, string(c))
			}
		}
		fmt.Fprintf(w, "  no agent client found (looked for %s in %s and %s)\n", strings.Join(names, ", "), e.Home, project)
	}
	for _, f := range findings {
		f.writeText(w)
	}
	return bad, len(findings), nil
}

// writeText writes the finding as doctor shows it to people.
func (f Finding) writeText(w io.Writer) {
	status := string(f.Status)
	if f.Status != Protected {
		status = strings.ToUpper(status)
	}
	fmt.Fprintf(w, "  %s (%s): %s\n", f.Client, f.File, status)
	if f.Server != "" {
		fmt.Fprintf(w, "    MCP server: %s\n", f.Server)
	}
	if f.Command != "" {
		fmt.Fprintf(w, "    runs: %s\n", f.Command)
	}
	if f.DefaultPolicy {
		fmt.Fprintln(w, "    policy: the built-in default policy (no --policy in the command; portcullis policy show-default prints it)")
	}
	for _, why := range f.Why {
		fmt.Fprintf(w, "    - %s\n", why)
	}
	if f.Status != Protected && f.Fix != "" {
		fmt.Fprintf(w, "    fix: %s\n", f.Fix)
	}
}
