// Package shell classifies shell commands before an agent runs them. It
// parses a command line with a real shell parser (mvdan.cc/sh/v3/syntax),
// finds every simple command the line would run — inside lists, pipelines,
// subshells, command and process substitutions, here-documents fed to a
// shell, `bash -c` and `eval` strings, and behind wrappers such as sudo,
// env, timeout and xargs — and says how dangerous the whole line is: safe,
// moderate, dangerous or blocked, with a risk score, an irreversible flag,
// reasons a person can read, and the commands it found.
//
// The classification is static and errs towards the stricter answer: a
// line is as dangerous as its most dangerous part, anything the parser
// cannot read is at least moderate, a command name known only at run time is
// at least moderate, and any command that touches Portcullis's own files,
// runs its human-only subcommands or signals its process is blocked, so an
// agent cannot approve itself.
//
// The package must never run anything: it executes no command, reads no
// file, resolves no variable from the environment and makes no network
// call. It imports only the standard library, the root package and
// mvdan.cc/sh/v3/syntax. See docs/SHELL.md for the categories, the families
// of built-in knowledge, the policy rules and the limits.
package shell
