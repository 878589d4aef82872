package cmdutil

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/auditlog"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// GroupCmd is a command that only holds subcommands: without one, or with
// an unknown one, it is bad input (exit status 2) with a suggestion.
func GroupCmd(use, short, long string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:                   use,
		DisableFlagsInUseLine: true,
		Short:                 short,
		Long:                  long,
		Args:                  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				cmd.SetOut(cmd.ErrOrStderr())
				_ = cmd.Usage()
				return UsageError("%s needs a command (see the list above)", strings.TrimPrefix(cmd.CommandPath(), "portcullis "))
			}
			return UnknownCommand(cmd, args[0])
		},
	}
	c.AddCommand(subs...)
	return c
}

// UnknownCommand is the error for a command cmd does not have, with the
// names it may have meant: bad input (exit status 2).
func UnknownCommand(cmd *cobra.Command, name string) error {
	return UsageError("%s", UnknownCommandMessage(cmd, name))
}

// FlagError makes a flag the command line got wrong bad input (exit status
// 2), naming the flags an unknown one may have meant.
func FlagError(cmd *cobra.Command, err error) error {
	return UsageError("%s", FlagErrorMessage(cmd, err))
}

// NoArgs refuses the arguments of a command that takes none (as its Args,
// or first thing in its RunE).
func NoArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return UsageError("%s: unexpected argument %q", strings.TrimPrefix(cmd.CommandPath(), "portcullis "), args[0])
	}
	return nil
}

// AliasFlag makes --alias another name of the flag name (for the one-letter
// flags earlier versions took as -v or --v, now shorthands of a long flag).
func AliasFlag(fs *pflag.FlagSet, alias, name string) {
	prev := fs.GetNormalizeFunc()
	fs.SetNormalizeFunc(func(f *pflag.FlagSet, n string) pflag.NormalizedName {
		if n == alias {
			n = name
		}
		return prev(f, n)
	})
}

// WithStore hands fn the store the flags name, and ends a command whose
// audit log does not verify with exit status 1 and the reason.
func WithStore(cmd *cobra.Command, env *Env, sf *StateFlags, fn func(ctx context.Context, st portcullis.Store, w io.Writer) error) error {
	st, err := sf.Open(cmd.Context(), env, Logger(cmd.ErrOrStderr()))
	if err != nil {
		return err
	}
	defer st.Close()
	err = fn(cmd.Context(), st, cmd.OutOrStdout())
	if ve := (*auditlog.VerifyError)(nil); errors.As(err, &ve) {
		return &ExitError{Code: 1, Msg: ve.Reason}
	}
	return err
}

// Execute runs cmd (the root of a tree, or one command alone) with these
// arguments and streams. Errors are not printed: the caller maps them to
// an exit status and a message (cmd/portcullis's exitCode).
func Execute(ctx context.Context, cmd *cobra.Command, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if args == nil {
		args = []string{} // cobra reads nil as "use os.Args"
	}
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	cmd.SetArgs(SingleDashLongFlags(cmd, args))
	cmd.SetIn(stdin)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	return cmd.ExecuteContext(ctx)
}
