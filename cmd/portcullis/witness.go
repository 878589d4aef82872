package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/portcullis/portcullis/server"
	"github.com/portcullis/portcullis/witness"
	"github.com/spf13/cobra"
)

// witnessFlags are the witness flags of `portcullis mcp`.
type witnessFlags struct {
	specs    []string
	interval time.Duration
}

func (f *witnessFlags) register(fs interface {
	Func(name, usage string, fn func(string) error)
	DurationVar(p *time.Duration, name string, value time.Duration, usage string)
}) {
	fs.Func("witness", "publish the audit chain's head to this witness: an http(s) `URL`, a file, or stderr (repeatable)", func(s string) error {
		f.specs = append(f.specs, s)
		return nil
	})
	fs.DurationVar(&f.interval, "witness-interval", time.Minute, "how often the head is published to the witnesses")
}

func (f *witnessFlags) witnesses(stderr io.Writer) ([]witness.Witness, error) {
	ws, err := witness.ParseAll(f.specs, stderr)
	if err != nil {
		return nil, usageError("--witness: %v", err)
	}
	return ws, nil
}

func newWitnessCmd() *cobra.Command {
	return groupCmd("witness", "A reference audit witness", `A reference audit witness: keeps the audit heads gateways publish
(--witness of serve and mcp) append-only over HTTP.`, newWitnessServeCmd())
}

func newWitnessServeCmd() *cobra.Command {
	var dir, listen, tokenFile string
	cmd := &cobra.Command{
		Use:     "serve --dir DIR [--listen ADDR] [--token-file FILE]",
		Short:   "Keep published heads append-only over HTTP",
		Example: `  portcullis witness serve --dir /var/lib/portcullis-witness --token-file witness.token`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := noArgs(cmd, args); err != nil {
				return err
			}
			if dir == "" {
				return usageError("witness serve needs --dir")
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return fmt.Errorf("witness directory: %w", err)
			}
			tok, err := server.WitnessToken(tokenFile, "")
			if err != nil {
				return usageError("--token-file: %v", err)
			}
			s := &witness.Server{Dir: dir, Token: tok, Logger: cliLogger(cmd.ErrOrStderr())}
			return s.ListenAndServe(cmd.Context(), listen, func(a net.Addr) {
				fmt.Fprintf(cmd.OutOrStdout(), "portcullis: witness on http://%s/heads/NAME, heads kept in %s\n", a, dir)
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&dir, "dir", "", "keep the heads in this `directory`, NAME.jsonl for each gateway (required)")
	fs.StringVar(&listen, "listen", "127.0.0.1:8480", "listen on this `address`")
	fs.StringVar(&tokenFile, "token-file", "", "require this bearer token (read from `file`) on every request")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}
