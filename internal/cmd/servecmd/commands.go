// Package servecmd holds the gateway's commands: serve, tools (its pinned
// MCP tools), bench (load through a running gateway) and witness (a
// reference audit witness). Their work is in packages server, approvals,
// loadgen and witness.
//
// Like every command package, it reads the process's environment only
// through the cmdutil.Env it is given, does no work that belongs to a
// domain package, and imports no command package but cmdutil.
package servecmd

import (
	"fmt"
	"net"
	"os"
	"time"

	"github.com/portcullis/portcullis/internal/cmd/cmdutil"
	"github.com/portcullis/portcullis/loadgen"
	"github.com/portcullis/portcullis/server"
	"github.com/portcullis/portcullis/witness"
	"github.com/spf13/cobra"
)

type serveOptions struct {
	config      string
	configGiven bool
	listen      string
	obs         cmdutil.ObsFlags
}

// NewServeCmd is `portcullis serve`.
func NewServeCmd(env *cmdutil.Env) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve [--config FILE] [--listen HOST:PORT]",
		Short: "The HTTP gateway: MCP upstreams on /mcp, tokens for agents",
		Long: `The HTTP gateway: the configured MCP upstreams behind /mcp, the decision API,
the approvals API and the console, for agents and people with tokens.
See portcullis.example.yaml for the configuration.`,
		Example: `  portcullis serve --config portcullis.yaml`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.configGiven = cmd.Flags().Changed("config")
			return runServe(cmd.Context(), env, &o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.config, "config", "portcullis.yaml", "gateway configuration `file`")
	fs.StringVar(&o.listen, "listen", "", "listen `address` HOST:PORT (overrides the configuration)")
	o.obs.Register(fs, false)
	return cmd
}

type toolsOptions struct {
	state   cmdutil.StateFlags
	changed bool
	as      string
}

// NewToolsCmd is `portcullis tools`.
func NewToolsCmd(env *cmdutil.Env) *cobra.Command {
	var o toolsOptions
	run := func(cmd *cobra.Command, pos []string) error {
		return runTools(cmd.Context(), env, &o, pos, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	cmd := &cobra.Command{
		Use:   "tools [--changed]",
		Short: "Pinned MCP tool definitions; accept a changed one (shows the diff)",
		Long: `The MCP tool definitions pinned when first seen. A tool whose definition
changes, or a new tool, is held until a person accepts it (tools accept).`,
		Args: cobra.ArbitraryArgs,
		RunE: run,
	}
	fs := cmd.Flags()
	o.state.Register(fs)
	fs.BoolVar(&o.changed, "changed", false, "list only tools whose definition changed and waits for a person")
	accept := &cobra.Command{
		Use:     "accept UPSTREAM TOOL [--as NAME]",
		Short:   "Accept a changed tool definition, after showing what changed",
		Example: `  portcullis tools accept github create_issue`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd, append([]string{"accept"}, args...))
		},
	}
	accept.Flags().StringVar(&o.as, "as", "", "who accepts (default $USER), recorded in the audit log")
	o.state.Register(accept.Flags())
	cmd.AddCommand(accept)
	return cmd
}

type benchOptions struct {
	state          cmdutil.StateFlags
	cfg            loadgen.Config
	tokenFile      string
	humanTokenFile string
	via, mix       string
	gatewayPID     int
	audit          bool
	json           bool
}

// NewBenchCmd is `portcullis bench`.
func NewBenchCmd(env *cmdutil.Env) *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench --token-file AGENT.token [flags]",
		Short: "Load a running gateway with agent sessions; throughput, latency, audit completeness",
		Long: `Load a running gateway with agent sessions and report throughput, latency and
the audit log's completeness. An agent token is required: --token-file, or the
token itself in $PORTCULLIS_AGENT_TOKEN.`,
		Example: `  portcullis bench --gateway http://127.0.0.1:8470 --token-file agent.token --sessions 32 --duration 1m`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBench(cmd.Context(), env, &o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	o.state.Register(fs)
	fs.StringVar(&o.cfg.BaseURL, "gateway", "", "the gateway's `URL` (default $PORTCULLIS_GATEWAY, else http://127.0.0.1:8470)")
	fs.StringVar(&o.tokenFile, "token-file", "", "`file` holding an agent's token (required unless $PORTCULLIS_AGENT_TOKEN holds the token itself)")
	fs.StringVar(&o.humanTokenFile, "human-token-file", "", "`file` holding the human token that approves writes (default admin.token in the state directory)")
	fs.StringVar(&o.via, "via", "both", "entry points: api (POST /v1/decide), mcp (/mcp) or both")
	fs.IntVar(&o.cfg.Sessions, "sessions", 16, "concurrent agent `sessions`")
	fs.DurationVar(&o.cfg.Duration, "duration", 30*time.Second, "how long to run (0: until --count)")
	fs.Int64Var(&o.cfg.Count, "count", 0, "stop after this many calls (0: until --duration)")
	fs.Float64Var(&o.cfg.Rate, "rate", 0, "overall calls per second (0: as fast as the gateway answers)")
	fs.StringVar(&o.mix, "mix", "read=60,write=15,deny=15,shell=10", "weights of the kinds of call: read, write, deny, shell")
	fs.StringVar(&o.cfg.Tools.Read, "read", "read_note", "a tool the policy allows")
	fs.StringVar(&o.cfg.Tools.Write, "write", "write_note", "a tool that needs a person once per session")
	fs.StringVar(&o.cfg.Tools.Deny, "deny", "delete_note", "a tool the policy denies")
	fs.StringVar(&o.cfg.Tools.Shell, "shell", "", "the shell tool (empty: no shell commands)")
	fs.StringVar(&o.cfg.Tools.ShellArg, "shell-arg", "command", "the shell tool's command argument")
	fs.DurationVar(&o.cfg.CallTimeout, "timeout", 30*time.Second, "bound on one call, a held write's approval included")
	fs.DurationVar(&o.cfg.ProgressEvery, "progress", time.Second, "how often to print progress on stderr (0: never)")
	fs.IntVar(&o.gatewayPID, "gateway-pid", 0, "the gateway's process `id`, to sample its resident memory (Linux)")
	fs.BoolVar(&o.audit, "audit", true, "check the audit log afterwards (opens the store of --state/--store)")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.Uint64Var(&o.cfg.Seed, "seed", 1, "seed of the mix")
	return cmd
}

// NewWitnessCmd is `portcullis witness`.
func NewWitnessCmd(env *cmdutil.Env) *cobra.Command {
	return cmdutil.GroupCmd("witness", "A reference audit witness", `A reference audit witness: keeps the audit heads gateways publish
(--witness of serve and mcp) append-only over HTTP.`, newWitnessServeCmd(env))
}

func newWitnessServeCmd(env *cmdutil.Env) *cobra.Command {
	var dir, listen, tokenFile string
	cmd := &cobra.Command{
		Use:     "serve --dir DIR [--listen ADDR] [--token-file FILE]",
		Short:   "Keep published heads append-only over HTTP",
		Example: `  portcullis witness serve --dir /var/lib/portcullis-witness --token-file witness.token`,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cmdutil.NoArgs(cmd, args); err != nil {
				return err
			}
			if dir == "" {
				return cmdutil.UsageError("witness serve needs --dir")
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return fmt.Errorf("witness directory: %w", err)
			}
			tok, err := server.WitnessToken(tokenFile, "")
			if err != nil {
				return cmdutil.UsageError("--token-file: %v", err)
			}
			s := &witness.Server{Dir: dir, Token: tok, Logger: cmdutil.Logger(cmd.ErrOrStderr())}
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
