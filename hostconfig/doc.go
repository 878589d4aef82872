// Package hostconfig knows the configuration files of the agents that
// Portcullis guards — Claude Code's user and project settings, Codex's
// hooks.json and the trust entries of its config.toml, Gemini CLI's
// settings, Claude Desktop's and Cursor's lists of MCP servers, Cursor's
// hooks.json, GitHub Copilot CLI's hook files and trusted folders,
// opencode's plugin directories — and changes them as a careful person
// would: merged, every other setting kept
// in its place, the previous file kept beside it as a backup.
//
// It installs Portcullis's hook (InstallHook; for opencode, a plugin file
// of Portcullis's own that runs the hook) or wraps MCP servers in
// `portcullis mcp` (WrapMCP), writes starter policies without overwriting
// one a person edited (WritePolicy), classifies an MCP server's tools for
// a person to review (ListTools, ClassifyTools), and reports whether each
// client it finds is protected (Check, behind `portcullis doctor`): it
// probes each hook command and starts each MCP server entry behind the
// wrapper for the MCP handshake, as the client would (never, unless
// asked, a server that only a project's own files name). Prepare,
// Protect and ProtectServer are what `portcullis init` does with these
// pieces, and Report what `portcullis doctor` does; they write what they
// did and found as the commands show it.
//
// It never decides a call: the hooks and wrappers it installs run the
// portcullis binary, whose gate decides. It refuses to install a command
// that would not last (a binary in the Go build cache or a temporary
// directory).
package hostconfig
