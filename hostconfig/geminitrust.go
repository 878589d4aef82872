package hostconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// geminiTrusts reports whether Gemini CLI trusts folder, and so runs the
// hooks of its .gemini/settings.json, with what was found. Gemini CLI runs
// a project's hooks only in a trusted folder ("Project hooks disabled
// because the folder is not trusted"), and says so only in its debug log:
// a project hook in any other folder leaves every call unchecked.
//
// The rules are Gemini CLI's own: folder trust switched off in the user's
// settings (security.folderTrust.enabled: false) trusts every folder;
// otherwise the longest rule of trustedFolders.json whose folder holds
// this one decides — TRUST_FOLDER, or TRUST_PARENT (the rule's parent
// folder), trusts it, and DO_NOT_TRUST does not. No rule is not trusted.
// GEMINI_CLI_TRUST_WORKSPACE=true in the client's own environment also
// trusts it; doctor cannot see that environment, and says so.
func (e Env) geminiTrusts(folder string) (bool, string) {
	settings := filepath.Join(e.Home, ".gemini", "settings.json")
	if data, err := os.ReadFile(settings); err == nil {
		var s struct {
			Security struct {
				FolderTrust struct {
					Enabled *bool `json:"enabled"`
				} `json:"folderTrust"`
			} `json:"security"`
		}
		if json.Unmarshal(data, &s) == nil && s.Security.FolderTrust.Enabled != nil && !*s.Security.FolderTrust.Enabled {
			return true, fmt.Sprintf("folder trust is off in %s, so Gemini CLI runs every project's hooks", settings)
		}
	}
	file := e.GeminiTrustedFolders
	if file == "" {
		file = filepath.Join(e.Home, ".gemini", "trustedFolders.json")
	}
	const unseen = " (unless the client runs with GEMINI_CLI_TRUST_WORKSPACE=true, which doctor cannot see)"
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return false, fmt.Sprintf("Gemini CLI does not trust %s (there is no %s): it skips the project's hooks without a word, and every call runs unchecked%s", folder, file, unseen)
	}
	if err != nil {
		return false, err.Error()
	}
	var rules map[string]string
	if err := json.Unmarshal(data, &rules); err != nil {
		return false, fmt.Sprintf("%s does not parse (%v): Gemini CLI refuses to start until it is fixed", file, err)
	}
	best, level := "", ""
	for rule, l := range rules {
		dir := rule
		if l == "TRUST_PARENT" {
			dir = filepath.Dir(rule)
		}
		if within(folder, dir) && len(rule) > len(best) {
			best, level = rule, l
		}
	}
	switch level {
	case "TRUST_FOLDER", "TRUST_PARENT":
		return true, fmt.Sprintf("Gemini CLI trusts %s (%s in %s), so it runs the project's hooks", folder, level, file)
	case "DO_NOT_TRUST":
		return false, fmt.Sprintf("Gemini CLI does not trust %s (DO_NOT_TRUST for %s in %s): it skips the project's hooks, and every call runs unchecked", folder, best, file)
	}
	return false, fmt.Sprintf("Gemini CLI does not trust %s (no rule for it in %s): it skips the project's hooks without a word, and every call runs unchecked%s", folder, file, unseen)
}
