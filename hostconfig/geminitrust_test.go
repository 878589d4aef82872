package hostconfig_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portcullis/portcullis/hostconfig"
)

// TestCheckGeminiFolderTrust: Gemini CLI runs a project's hooks only in a
// folder it trusts, so a project hook is protected only where
// trustedFolders.json trusts the project (its folder, or its parent's),
// or folder trust is off; no file, no rule, DO_NOT_TRUST (the longest
// rule wins) or a file that does not parse is not protected, with the fix.
// A hook for the user runs in every folder. Installing into a folder
// that is not trusted says so.
func TestCheckGeminiFolderTrust(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	answer := probeScript(t, e, `echo '{"decision":"allow"}'`)
	project := filepath.Join(e.Home, "work", "app")
	res, err := e.InstallHook(hostconfig.Hook{Client: hostconfig.Gemini, Scope: hostconfig.ProjectScope, Project: project,
		Command: []string{answer, "hook", "gemini", "--policy", e.policy}})
	if err != nil {
		t.Fatal(err)
	}
	if notes := strings.Join(res.Notes, "\n"); !strings.Contains(notes, "only in a folder you trust") {
		t.Errorf("installing into a folder Gemini CLI does not trust says %q; want the trust note", notes)
	}
	trusted := filepath.Join(e.Home, ".gemini", "trustedFolders.json")
	settings := filepath.Join(e.Home, ".gemini", "settings.json")
	for _, tc := range []struct {
		name, folders, settings string
		want                    hostconfig.Status
		why                     string
	}{
		{"no trusted folders", "", "", hostconfig.NotProtected, "there is no"},
		{"trusted folder", `{"` + project + `": "TRUST_FOLDER"}`, "", hostconfig.Protected, "TRUST_FOLDER"},
		{"trusted parent", `{"` + filepath.Join(e.Home, "work", "other") + `": "TRUST_PARENT"}`, "", hostconfig.Protected, "TRUST_PARENT"},
		{"another folder", `{"` + filepath.Join(e.Home, "elsewhere") + `": "TRUST_FOLDER"}`, "", hostconfig.NotProtected, "no rule for it"},
		{"longest rule distrusts", `{"` + e.Home + `": "TRUST_FOLDER", "` + project + `": "DO_NOT_TRUST"}`, "", hostconfig.NotProtected, "DO_NOT_TRUST"},
		{"does not parse", `{"` + project + `": `, "", hostconfig.NotProtected, "does not parse"},
		{"folder trust off", "", `{"security": {"folderTrust": {"enabled": false}}}`, hostconfig.Protected, "folder trust is off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			remove(t, trusted, settings)
			if tc.folders != "" {
				writeFile(t, trusted, tc.folders, 0o600)
			}
			if tc.settings != "" {
				writeFile(t, settings, tc.settings, 0o600)
			}
			var f *hostconfig.Finding
			for _, x := range e.Check(ctx, project, []hostconfig.Client{hostconfig.Gemini}, nil) {
				if strings.HasPrefix(x.File, project) {
					f = &x
				}
			}
			if f == nil {
				t.Fatal("no finding for the project's settings")
			}
			why := strings.Join(f.Why, "\n")
			if f.Status != tc.want || !strings.Contains(why, tc.why) {
				t.Errorf("project hook: %s, why %q; want %s, saying %q", f.Status, why, tc.want, tc.why)
			}
			if f.Status == hostconfig.NotProtected && !strings.Contains(f.Fix, "portcullis hook install gemini --user") {
				t.Errorf("fix %q; want the user install", f.Fix)
			}
		})
	}

	// A hook for the user: no folder trust needed.
	remove(t, trusted, settings)
	if _, err := e.InstallHook(hostconfig.Hook{Client: hostconfig.Gemini, Scope: hostconfig.UserScope,
		Command: []string{answer, "hook", "gemini", "--policy", e.policy}}); err != nil {
		t.Fatal(err)
	}
	for _, x := range e.Check(ctx, project, []hostconfig.Client{hostconfig.Gemini}, nil) {
		if x.File == settings && x.Status != hostconfig.Protected {
			t.Errorf("user hook: %+v; want protected", x)
		}
	}
}

func remove(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
}
