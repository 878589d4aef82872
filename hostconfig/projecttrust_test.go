package hostconfig_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis/hostconfig"
)

// TestCheckRunsProjectHooksOnlyWhenTrusted: a hook command that a
// project's own file names is a command a cloned repository chose. doctor
// reads it (binary, policy) but runs it only with Probes.Project (doctor
// --trust-project), as it starts a project's MCP servers; the user's own
// hook is run either way.
func TestCheckRunsProjectHooksOnlyWhenTrusted(t *testing.T) {
	ctx := context.Background()
	for _, c := range []hostconfig.Client{hostconfig.ClaudeCode, hostconfig.Gemini, hostconfig.Cursor, hostconfig.Copilot, hostconfig.OpenCode} {
		t.Run(string(c), func(t *testing.T) {
			e := newEnv(t)
			marker := filepath.Join(e.Home, "ran")
			// The script answers every client's format at once: each reads
			// the field it knows.
			script := probeScript(t, e, `touch "`+marker+`"; echo '{"decision":"allow","permission":"allow","permissionDecision":"allow","hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}'`)
			project := filepath.Join(e.Home, "work", "cloned")
			if _, err := e.InstallHook(hostconfig.Hook{Client: c, Scope: hostconfig.ProjectScope, Project: project, Command: []string{script, "hook", string(c)}}); err != nil {
				t.Fatal(err)
			}
			find := func(fs []hostconfig.Finding) *hostconfig.Finding {
				for i := range fs {
					if strings.HasPrefix(fs[i].File, project) && fs[i].Server == "" {
						return &fs[i]
					}
				}
				t.Fatalf("no finding for the project's hook file: %+v", fs)
				return nil
			}

			f := find(e.CheckWith(ctx, project, []hostconfig.Client{c}, hostconfig.Probes{}))
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("doctor ran the hook command of the project's own file without --trust-project")
			}
			if why := strings.Join(f.Why, "\n"); !strings.Contains(why, "not run: the project's own file") || !strings.Contains(why, "--trust-project") {
				t.Errorf("untrusted project hook: %+v; want it read, not run, and the flag that runs it named", f)
			}

			f = find(e.CheckWith(ctx, project, []hostconfig.Client{c}, hostconfig.Probes{Project: true}))
			if _, err := os.Stat(marker); err != nil {
				t.Fatalf("doctor --trust-project did not run the project's hook command: %v (%+v)", err, f)
			}
			if why := strings.Join(f.Why, "\n"); !strings.Contains(why, "was answered: allow") {
				t.Errorf("trusted project hook: %+v; want the probe's answer", f)
			}
		})
	}
	t.Run("user hook", func(t *testing.T) {
		e := newEnv(t)
		marker := filepath.Join(e.Home, "ran")
		script := probeScript(t, e, `touch "`+marker+`"; echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}'`)
		if _, err := e.InstallHook(hostconfig.Hook{Client: hostconfig.ClaudeCode, Scope: hostconfig.UserScope, Command: []string{script, "hook", "claude-code"}}); err != nil {
			t.Fatal(err)
		}
		// The project is the home directory: ~/.claude/settings.json is the
		// user's own file, run without --trust-project.
		e.CheckWith(ctx, e.Home, []hostconfig.Client{hostconfig.ClaudeCode}, hostconfig.Probes{})
		if _, err := os.Stat(marker); err != nil {
			t.Errorf("doctor did not run the user's own hook command: %v", err)
		}
	})
}
