package portcullis_test

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/portcullis/portcullis"

// layers names which of the module's own packages each package may import.
// The root is vocabulary and imports only the standard library; the core
// imports the root; gate imports the root and the core; adapters import only
// the root; server wires one gateway's adapters; only the command layer
// (cmd/portcullis and internal/cmd/..., checked by TestCommandLayer) wires
// everything. storetest is the shared
// conformance suite for stores and imports the root.
var layers = map[string][]string{
	"":         {},
	"policy":   {"", "internal/english"},
	"autonomy": {""},
	"shell":    {"", "internal/jsonlines"},
	"gate":     {"", "policy", "autonomy", "shell", "internal/jsonlines"},
	// The loop of JSON lines in, JSON lines out that gate (decide) and
	// shell (classify) answer; standard library only.
	"internal/jsonlines": {},
	"storetest":          {""},
	// What a policy change would do, asked of the gate: policy diff
	// compares two policies' levels, policy replay re-decides an audit
	// log. Neither opens a store; each writes its own report as the
	// command shows it, so that it is tested with the type.
	"policydiff": {"", "policy", "gate"},
	// policy test runs a test file's cases through gates with stand-in
	// validators, counting budgets in memory.
	"policytest": {"", "policy", "gate", "memstore"},
	"replay":     {"", "gate", "internal/english"},
	// The recorded audit log of replay's tests and benchmarks.
	"replay/replaytest": {"", "gate", "policy", "sqlite"},
	// loadgen drives a gateway from outside, through its HTTP client.
	"loadgen": {"", "client"},
	// The gateway's Go client reads an agent's token file.
	"client": {"", "internal/secret"},
	// The people's side of approvals and the audit log's readers take
	// the gate, the store and the witnesses as interfaces of their own:
	// they import only the root (approvals also the line diff of the tool
	// definitions it shows, and the client, which is its Service through
	// a running gateway and names a gateway that does not answer).
	"approvals": {"", "client", "internal/linediff", "internal/secret"},
	"auditlog":  {"", "internal/english"},
	// The use of the budgets as people read it, from a store.
	"budgets": {""},
	// The LLM providers share how they report a failed request, a
	// standard-library helper of their own.
	"validator/internal/failure": {},
	"validator":                  {"", "validator/internal/failure"},
	"validator/anthropic":        {"", "validator/internal/failure"},
	"validator/openai":           {"", "validator/internal/failure"},
	// The validator a policy asks for, built from its providers: the
	// model providers through the provider program (validator/remote),
	// whose SDKs the gateway does not link.
	"validator/providers": {"", "validator", "validator/command", "validator/remote"},
	// The provider program's protocol, both sides.
	"validator/remote":            {"", "validator", "validator/internal/failure"},
	"validator/remote/remotetest": {"validator/remote"},
	// The state directory and the store a URL names in it.
	"state": {"", "sqlite", "postgres"},
	// The clients' configuration files; init's starter policy is the
	// default policy, checked by loading it.
	"hostconfig": {"policy"},
	// Which build is running (`portcullis version`).
	"internal/buildinfo": {},
	// A count with its noun, for every report that prints one.
	"internal/english": {},
	// The secrets kept in files (tokens, the audit key), read and created.
	"internal/secret": {},
	// The HTTP entry points share one guard (Host and Origin rules, the
	// count of wrong credentials, body deadlines); it imports no package
	// of this module.
	"internal/guard":  {},
	"httpapi":         {"", "internal/guard"},
	"httpapi/console": {"", "internal/guard", "internal/linediff"},
	// The line diff of tool definitions the console and `portcullis
	// tools accept` (through approvals) show.
	"internal/linediff": {},
	"mcpgw":             {"", "internal/guard"},
	// The shell gate behind `portcullis exec` sees the gate as a Decider
	// and a Holder, as the hook does.
	"shellgate": {""},
	// server is `portcullis serve` as a component: it wires the gate, the
	// HTTP entry points, the metrics and the witnesses of one gateway, and
	// nothing that reads the command line.
	"server": {"", "auditlog", "gate", "policy", "internal/english", "internal/guard", "internal/secret", "httpapi", "httpapi/console", "mcpgw", "metrics", "notify", "tracing", "witness"},
}

// TestImportRules enforces the layering of docs/ARCHITECTURE.md ("Packages") with `go list`, the way
// tailscale's deptest does. Packages not named in layers are adapters.
func TestImportRules(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go command is needed to list imports: %v", err)
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	std := stdPackages(t)
	checked := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		pkg, imports := rel(fields[0]), fields[1:]
		checked++
		if commandLayer(pkg) {
			continue
		}
		allowed, named := layers[pkg]
		if !named {
			allowed = []string{""} // an adapter
		}
		for _, imp := range imports {
			switch {
			case strings.HasPrefix(imp, module+"/") || imp == module:
				if r := rel(imp); !slices.Contains(allowed, r) {
					t.Errorf("package %q imports %q; it may import only %q of this module", show(pkg), show(r), showAll(allowed))
				}
			case pkg == "" && !std[imp]:
				t.Errorf("the root package imports %q; it may import only the standard library", imp)
			}
		}
	}
	if checked < 4 {
		t.Fatalf("go list reported %d packages; want the whole module", checked)
	}
}

// commandLayer reports whether pkg is of the command layer, which may
// import any package of the module (TestCommandLayer has its rules).
func commandLayer(pkg string) bool {
	return strings.HasPrefix(pkg, "cmd/") || strings.HasPrefix(pkg, "internal/cmd/")
}

// TestCommandLayer enforces the rules of the command layer
// (docs/ARCHITECTURE.md, "The command layer"): only it imports the
// command-line library; no other package imports it; a command package
// under internal/cmd imports no sibling but cmdutil, and cmdutil none.
func TestCommandLayer(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	commands := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		pkg, imports := rel(fields[0]), fields[1:]
		inCmd := strings.HasPrefix(pkg, "internal/cmd/")
		if inCmd && pkg != "internal/cmd/cmdutil" {
			commands++
		}
		for _, imp := range imports {
			r := rel(imp)
			switch {
			case strings.HasPrefix(imp, "github.com/spf13/cobra") || strings.HasPrefix(imp, "github.com/spf13/pflag"):
				if !commandLayer(pkg) {
					t.Errorf("package %q imports %q; only cmd/portcullis and internal/cmd/... read the command line", show(pkg), imp)
				}
			case !strings.HasPrefix(imp, module+"/"):
			case strings.HasPrefix(r, "internal/cmd/") && !commandLayer(pkg):
				t.Errorf("package %q imports the command package %q; the domain packages never import the command layer", show(pkg), r)
			case inCmd && strings.HasPrefix(r, "internal/cmd/") && (r != "internal/cmd/cmdutil" || pkg == "internal/cmd/cmdutil"):
				t.Errorf("command package %q imports %q; a command package imports only internal/cmd/cmdutil of its siblings", pkg, r)
			}
		}
	}
	if commands == 0 {
		t.Fatalf("go list reported no command package under internal/cmd")
	}
}

// processReads are the calls that read the process's environment, which a
// command package reads only through the cmdutil.Env it is given (so that
// a test runs the command with an environment of its own, no t.Setenv).
var processReads = map[string][]string{
	"os":         {"Getenv", "LookupEnv", "Environ", "ExpandEnv", "UserHomeDir", "UserConfigDir", "UserCacheDir", "Getwd", "Executable", "Args"},
	"signal":     {"Notify"},
	"hostconfig": {"FromOS"},
}

// TestCommandEnvironment checks the sources of internal/cmd, tests
// included, for reads of the process's environment.
func TestCommandEnvironment(t *testing.T) {
	files := 0
	err := filepath.WalkDir("internal/cmd", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			name := ""
			if x, ok := sel.X.(*ast.Ident); ok {
				name = x.Name
			}
			if slices.Contains(processReads[name], sel.Sel.Name) || sel.Sel.Name == "Setenv" {
				t.Errorf("%s: %s.%s reads the process's environment; take it from the cmdutil.Env the command is given", path, name, sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("no source file under internal/cmd")
	}
}

func stdPackages(t *testing.T) map[string]bool {
	out, err := exec.Command("go", "list", "std").Output()
	if err != nil {
		t.Fatalf("go list std: %v", err)
	}
	m := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		m[p] = true
	}
	return m
}

func rel(p string) string {
	if p == module {
		return ""
	}
	return strings.TrimPrefix(p, module+"/")
}

func show(p string) string {
	if p == "" {
		return "portcullis (root)"
	}
	return p
}

func showAll(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = show(p)
	}
	return out
}

// TestGatewayLinksNoLLMSDK: the gateway's binary does not link the LLM
// providers' SDKs, whose package initialisation would keep megabytes of it
// resident in every gateway, validator or not; they are linked only into
// cmd/portcullis-provider, which the gateway starts when a policy
// configures them (docs/ARCHITECTURE.md, "The provider process").
func TestGatewayLinksNoLLMSDK(t *testing.T) {
	sdks := []string{"github.com/anthropics/anthropic-sdk-go", "github.com/openai/openai-go"}
	for _, tc := range []struct {
		cmd   string
		links bool
	}{
		{"./cmd/portcullis", false},
		{"./cmd/portcullis-provider", true},
	} {
		out, err := exec.Command("go", "list", "-deps", tc.cmd).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", tc.cmd, err, out)
		}
		for _, sdk := range sdks {
			linked := false
			for _, p := range strings.Fields(string(out)) {
				if p == sdk || strings.HasPrefix(p, sdk+"/") {
					linked = true
					break
				}
			}
			if linked != tc.links {
				t.Errorf("%s links %s: %v; want %v", tc.cmd, sdk, linked, tc.links)
			}
		}
	}
}

// TestGatewayLinksNoGRPC: the gateway exports traces over OTLP/HTTP, and
// its binary links neither gRPC nor what comes with it (grpc-gateway,
// golang.org/x/net's HTTP/2), whose package initialisation kept about 2 MB
// of an idle gateway resident (docs/BENCHMARKS.md). The official
// otlptracehttp client imports gRPC for its configuration; package tracing
// has its own client under the official otlptrace exporter.
func TestGatewayLinksNoGRPC(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./cmd/portcullis").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/portcullis: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, heavy := range []string{"google.golang.org/grpc", "github.com/grpc-ecosystem/grpc-gateway", "golang.org/x/net/http2", "go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"} {
			if p == heavy || strings.HasPrefix(p, heavy+"/") {
				t.Errorf("./cmd/portcullis links %s", p)
			}
		}
	}
}
