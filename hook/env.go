package hook

import (
	"path/filepath"
	"slices"
)

// Env is where the hosts keep their files, as the hook's process finds
// them: the caller reads it from the environment (the package reads
// none).
type Env struct {
	// Home is the user's home directory ("" when there is none: the
	// projects' files only).
	Home string
	// Projects are the project directories the hook runs for: Claude
	// Code's $CLAUDE_PROJECT_DIR and the working directory, empty ones
	// left out.
	Projects []string
	// ClaudeConfigDir is $CLAUDE_CONFIG_DIR, where Claude Code keeps
	// .claude.json instead of the home directory.
	ClaudeConfigDir string
	// CopilotHome is $COPILOT_HOME: Copilot CLI's hooks and the folders
	// it trusts.
	CopilotHome string
	// GeminiTrustedFolders is $GEMINI_CLI_TRUSTED_FOLDERS_PATH: the
	// folders Gemini CLI trusts, kept elsewhere.
	GeminiTrustedFolders string
	// XDGConfigHome and OpenCodeConfigDir are $XDG_CONFIG_HOME and
	// $OPENCODE_CONFIG_DIR, where opencode also reads its configuration
	// and plugins (used only when absolute).
	XDGConfigHome, OpenCodeConfigDir string
	// UserConfigDir is the user's configuration directory
	// (os.UserConfigDir), where Claude Desktop keeps its MCP servers.
	UserConfigDir string
}

// ClientFiles are the files that tell any supported client what to run,
// for the user and each project (ClientConfigFiles): the `portcullis mcp`
// wrapper protects them all.
func (e Env) ClientFiles() []string {
	var out []string
	for _, p := range e.Projects {
		out = append(out, ClientConfigFiles(e.Home, p, e.ClaudeConfigDir, e.UserConfigDir)...)
	}
	return out
}

// HostFiles are the settings files that hold host's hooks, for the user
// and for each project: an agent that could edit them could remove the
// hook, so the hook's gate protects them like Portcullis's own files.
func (e Env) HostFiles(host Host) []string {
	var out []string
	for _, project := range e.Projects {
		if project != "" {
			out = append(out, host.configFiles(e.Home, project)...)
		}
	}
	switch host.Name() {
	case Copilot{}.Name():
		if e.CopilotHome != "" {
			out = append(out, e.CopilotHome)
		}
	case Gemini{}.Name():
		if e.GeminiTrustedFolders != "" {
			out = append(out, e.GeminiTrustedFolders)
		}
	case OpenCode{}.Name():
		if filepath.IsAbs(e.XDGConfigHome) {
			out = append(out, filepath.Join(e.XDGConfigHome, "opencode"))
		}
		if filepath.IsAbs(e.OpenCodeConfigDir) {
			out = append(out, e.OpenCodeConfigDir)
		}
	}
	return out
}

// ClaudeMCP reads the definitions of an MCP server from the files Claude
// Code reads them from — .claude.json in ClaudeConfigDir or the home
// directory, and .mcp.json of each project — for Options.MCPServers, and
// returns those files, which an agent must not rewrite while servers are
// deferred to their wrappers.
func (e Env) ClaudeMCP() (read func(server string) ([]MCPServer, error), files []string) {
	dir := e.ClaudeConfigDir
	if dir == "" {
		dir = e.Home // no home either: .claude.json is looked for in the working directory, and not found
	}
	claudeJSON := filepath.Join(dir, ".claude.json")
	var projects []string
	for _, p := range e.Projects {
		if p != "" && !slices.Contains(projects, p) {
			projects = append(projects, p)
			files = append(files, ClaudeMCPConfigFiles(claudeJSON, p)...)
		}
	}
	read = func(server string) ([]MCPServer, error) {
		var all []MCPServer
		for _, p := range projects {
			defs, err := ClaudeMCPServers(claudeJSON, p, server)
			if err != nil {
				return nil, err
			}
			all = append(all, defs...)
		}
		return all, nil
	}
	return read, files
}
