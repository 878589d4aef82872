package cmdutil

// The conventions of Portcullis's command line on top of spf13/cobra: the
// names a mistyped command or flag may have meant, and the single-dash
// long flags (-policy FILE) that earlier versions, which parsed flags with
// the standard library, took. They read nothing of the process: the
// command tree and the arguments are given.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Annotations of a command that tell SingleDashLongFlags where its own
// flags end.
const (
	// FlagsFirst: the command's flags end at its first argument (exec:
	// `exec ls -la`).
	FlagsFirst = "portcullis/flags-first"
	// OwnParser names a first argument that hands the command line to
	// another parser (exec --shell: a shell's command line).
	OwnParser = "portcullis/own-parser"
)

// UnknownCommandMessage is the message for a command cmd does not have, with the
// names it may have meant.
func UnknownCommandMessage(cmd *cobra.Command, name string) string {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if s := Suggestions(cmd, name); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t") + "\n"
	}
	return fmt.Sprintf("%s\nRun '%s --help' for usage.", msg, cmd.CommandPath())
}

// FlagErrorMessage is the message for a flag the command line got wrong, naming
// the flags an unknown one may have meant.
func FlagErrorMessage(cmd *cobra.Command, err error) string {
	msg := err.Error()
	var ne *pflag.NotExistError
	if errors.As(err, &ne) && ne.GetSpecifiedShortnames() == "" {
		if s := FlagSuggestions(cmd, ne.GetSpecifiedName()); len(s) > 0 {
			msg += "\n\nDid you mean this?\n\t--" + strings.Join(s, "\n\t--") + "\n"
		}
	}
	return fmt.Sprintf("%s\nRun '%s --help' for usage.", msg, cmd.CommandPath())
}

// FlagSuggestions are the flags of cmd whose names are close to name, by
// cobra's own measure for command names (a prefix, or a small edit
// distance).
func FlagSuggestions(cmd *cobra.Command, name string) []string {
	probe := &cobra.Command{Use: "probe"}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && f.Deprecated == "" {
			probe.AddCommand(&cobra.Command{Use: f.Name, Run: func(*cobra.Command, []string) {}})
		}
	})
	return Suggestions(probe, name)
}

// Suggestions are the subcommands of cmd whose names are close to name.
func Suggestions(cmd *cobra.Command, name string) []string {
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	return cmd.SuggestionsFor(name)
}

// SingleDashLongFlags rewrites -name and -name=value to --name and
// --name=value where name is a long flag of the command the arguments
// select. Nothing after "--" is touched, nor a flag's value, nor (for a
// command annotated FlagsFirst) anything from its first argument on, nor
// the arguments of a command whose first argument is its OwnParser.
func SingleDashLongFlags(root *cobra.Command, args []string) []string {
	cmd, rest, err := root.Find(args)
	if err != nil || cmd == root {
		return args
	}
	var words []string
	for c := cmd; c != root; c = c.Parent() {
		words = append([]string{c.Name()}, words...)
	}
	if len(words)+len(rest) != len(args) {
		return args // an alias or an unusual order: leave it to cobra
	}
	return append(words, singleDash(cmd, rest)...)
}

// singleDash is SingleDashLongFlags for the arguments of cmd.
func singleDash(cmd *cobra.Command, args []string) []string {
	if len(args) > 0 && args[0] == cmd.Annotations[OwnParser] {
		return args
	}
	cmd.InitDefaultHelpFlag()
	fs := cmd.Flags()
	out := make([]string, len(args))
	copy(out, args)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if a == "--" {
			break
		}
		if len(a) < 2 || a[0] != '-' {
			if cmd.Annotations[FlagsFirst] != "" {
				break
			}
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		var f *pflag.Flag
		switch {
		case strings.HasPrefix(a, "--"):
			f = fs.Lookup(name)
		case len(name) > 1 && fs.Lookup(name) != nil:
			f = fs.Lookup(name)
			out[i] = "-" + a
		default:
			// Shorthands: the last of a cluster may take the next
			// argument as its value, unless the value is attached.
			f = fs.ShorthandLookup(name[len(name)-1:])
			hasValue = hasValue || len(name) > 1 && fs.ShorthandLookup(name[:1]) != nil && fs.ShorthandLookup(name[:1]).NoOptDefVal == ""
		}
		if f != nil && !hasValue && f.NoOptDefVal == "" {
			i++ // the flag's value, whatever it looks like
		}
	}
	return out
}
