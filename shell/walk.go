package shell

import (
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// walker walks the syntax tree of one command line (and of the shell code
// nested in it), judging every simple command it finds.
type walker struct {
	c     *Classifier
	res   *result
	src   string // the source the current tree was parsed from
	depth int    // nesting of shell code given as strings

	// vars holds every literal value each variable is given anywhere in
	// the line; a word using the variable may take any of them. arrays
	// holds the literal elements of arrays, ifs the characters the line
	// adds to IFS.
	vars   map[string][]string
	arrays map[string][]string
	ifs    string
	// cwd is the directory of the last literal cd, when there was one.
	cwd string
	// cwdMoved is set once the line changes directory to anywhere but a
	// literal place beneath the working directory.
	cwdMoved bool
	// downloaded names files a network fetcher in the line writes to.
	downloaded map[string]bool
	// stage gathers what the commands of the current pipeline stage do.
	stage *stageInfo
	// onLayer, when set, sees every layer of every simple command (used
	// to check rule examples).
	onLayer func(c *cmd)
	// crude marks the walker of the fallback reading of unparseable text,
	// which does not parse nested code.
	crude bool
	// procOut counts the output process substitutions >( ) being walked.
	procOut int
}

func newWalker(c *Classifier) *walker {
	return &walker{c: c, res: &result{}}
}

// spend counts one unit of work and reports whether the budget allows it.
func (w *walker) spend() bool {
	w.res.work++
	if w.res.work <= maxWork {
		return true
	}
	if !w.res.overrun {
		w.res.overrun = true
		w.add(finding{cat: Dangerous, score: scoreDangerous, reason: "too complex to classify completely"})
	}
	return false
}

func (w *walker) add(f finding) { w.res.add(f) }

// script parses and walks one piece of shell code.
func (w *walker) script(src string) {
	if strings.TrimSpace(src) == "" {
		return
	}
	if !w.spend() {
		return
	}
	if len(src) > maxInput {
		w.add(finding{cat: Dangerous, score: scoreDangerous, reason: fmt.Sprintf("longer than %d KiB: too long to classify", maxInput>>10)})
		w.fallback(src)
		return
	}
	if d, ops := shape(src); d > maxNesting || ops > maxOperators {
		// The parser's cost grows faster than the input's when brackets
		// nest this deep or pipelines and lists chain this long; no real
		// command does.
		w.add(finding{cat: Dangerous, score: scoreDangerous, reason: "too deeply nested or too long a chain of commands to classify"})
		w.fallback(src)
		return
	}
	f, err := w.c.parse(src, false)
	if err != nil {
		w.add(finding{cat: Moderate, score: scoreUnparsed, reason: "does not parse as a shell command (" + parseErr(err) + ")"})
		if rf, rerr := w.c.parse(src, true); rerr == nil {
			f = rf
		}
		w.fallback(src)
	}
	if f == nil {
		return
	}
	saved := w.src
	w.src = src
	if strings.ContainsRune(src, '=') || strings.Contains(src, "for") || strings.Contains(src, "select") || strings.Contains(src, "set --") {
		w.collectVars(f) // only assignments and loops give variables values
	}
	w.stmts(f.Stmts)
	w.src = saved
}

// nested walks shell code found inside the line: a bash -c string, an eval,
// a here-document fed to a shell.
func (w *walker) nested(src string) {
	if w.crude {
		return
	}
	if w.depth >= maxDepth {
		w.add(finding{cat: Dangerous, score: scoreDangerous, reason: fmt.Sprintf("shell code nested more than %d levels deep", maxDepth)})
		return
	}
	w.depth++
	w.script(src)
	w.depth--
}

// shape returns how deep brackets nest in src and how many | and &
// characters it holds, outside single quotes.
func shape(src string) (deepest, ops int) {
	depth := 0
	quoted := false
	for i := 0; i < len(src); i++ {
		switch c := src[i]; {
		case quoted:
			quoted = c != '\''
		case c == '\\':
			i++
		case c == '\'':
			quoted = true
		case c == '(' || c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == ')' || c == '}' || c == ']':
			depth = max(depth-1, 0)
		case c == '|' || c == '&':
			ops++
		}
	}
	return deepest, ops
}

func parseErr(err error) string {
	s := err.Error()
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

// fallback reads text the parser rejected as crudely as possible: every run
// of words between shell punctuation and quotes is taken as a command. Only
// what it finds dangerous or blocked counts; the parse failure itself
// already makes the line moderate.
func (w *walker) fallback(src string) {
	sub := &walker{c: w.c, res: &result{work: w.res.work}, crude: true}
	isSep := func(r rune) bool { return strings.ContainsRune(";&|(){}`'\"<>\n", r) }
	for _, seg := range strings.FieldsFunc(src, isSep) {
		words := strings.Fields(seg)
		if len(words) == 0 {
			continue
		}
		argv := make([]field, len(words))
		for i, s := range words {
			s = strings.ReplaceAll(s, `\`, "")
			argv[i] = field{s: s, id: i, static: !strings.ContainsAny(s, "$"), glob: hasGlob(s)}
		}
		sub.simple(argv, stdin{})
		if sub.res.overrun {
			break
		}
	}
	w.res.work = sub.res.work
	for _, f := range sub.res.findings {
		if f.cat.Rank() >= Dangerous.Rank() {
			w.add(f)
		}
	}
	if downloadCradle(strings.ToLower(src)) {
		w.add(finding{cat: Dangerous, score: scoreDangerHigh + 5, reason: "PowerShell download cradle: runs code downloaded from the network"})
	}
}

func (w *walker) stmts(list []*syntax.Stmt) {
	for _, s := range list {
		w.stmt(s)
	}
}

func (w *walker) stmt(s *syntax.Stmt) {
	if s == nil {
		return
	}
	in := w.redirects(s.Redirs)
	switch x := s.Cmd.(type) {
	case nil:
	case *syntax.CallExpr:
		w.call(x, in)
	case *syntax.BinaryCmd:
		if x.Op == syntax.Pipe || x.Op == syntax.PipeAll {
			w.pipeline(x)
		} else {
			w.stmt(x.X)
			w.stmt(x.Y)
		}
	case *syntax.Subshell:
		w.stmts(x.Stmts)
	case *syntax.Block:
		w.stmts(x.Stmts)
	case *syntax.IfClause:
		for c := x; c != nil; c = c.Else {
			w.stmts(c.Cond)
			w.stmts(c.Then)
		}
	case *syntax.WhileClause:
		w.stmts(x.Cond)
		w.stmts(x.Do)
	case *syntax.ForClause:
		if x.Loop != nil {
			w.subs(x.Loop)
		}
		w.stmts(x.Do)
	case *syntax.CaseClause:
		w.subsWord(x.Word)
		for _, it := range x.Items {
			for _, p := range it.Patterns {
				w.subsWord(p)
			}
			w.stmts(it.Stmts)
		}
	case *syntax.FuncDecl:
		w.funcDecl(x)
	case *syntax.ArithmCmd:
		if x.X != nil {
			w.subs(x.X)
		}
	case *syntax.TestClause:
		if x.X != nil {
			w.subs(x.X)
		}
	case *syntax.DeclClause:
		w.decl(x)
	case *syntax.LetClause:
		for _, e := range x.Exprs {
			if e != nil {
				w.subs(e)
			}
		}
	case *syntax.TimeClause:
		w.stmt(x.Stmt)
	case *syntax.CoprocClause:
		w.stmt(x.Stmt)
	case *syntax.TestDecl:
		w.subsWord(x.Description)
		w.stmt(x.Body)
	default:
		w.add(finding{cat: Moderate, score: scoreModerate, reason: fmt.Sprintf("shell construct %T is not understood", x)})
	}
}

// subs walks the commands inside command and process substitutions found
// anywhere under n.
func (w *walker) subs(n syntax.Node) {
	syntax.Walk(n, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.CmdSubst:
			w.stmts(x.Stmts)
			return false
		case *syntax.ProcSubst:
			if x.Op == syntax.CmdOut {
				w.procOut++ // what runs in >( ) reads what is written to it
				w.stmts(x.Stmts)
				w.procOut--
			} else {
				w.stmts(x.Stmts)
			}
			return false
		}
		return true
	})
}

func (w *walker) subsWord(word *syntax.Word) {
	if word != nil && len(word.Parts) > 0 && !plainWord(word) {
		w.subs(word)
	}
}

// plainWord reports whether a word holds only literal text, so it has no
// substitutions to walk.
func plainWord(word *syntax.Word) bool {
	for _, p := range word.Parts {
		switch x := p.(type) {
		case *syntax.Lit, *syntax.SglQuoted:
		case *syntax.DblQuoted:
			for _, q := range x.Parts {
				if _, ok := q.(*syntax.Lit); !ok {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

func (w *walker) funcDecl(x *syntax.FuncDecl) {
	names := x.Names
	if x.Name != nil {
		names = append(names, x.Name)
	}
	for _, n := range names {
		if forkBomb(x, n.Value) {
			w.add(finding{cat: Dangerous, score: scoreDangerHigh, reason: "fork bomb: the function " + n.Value + " starts copies of itself until the machine stops"})
		}
		if _, known := lookup(n.Value); known {
			w.add(finding{cat: Moderate, score: scoreModerate, reason: fmt.Sprintf("defines a function named %s, hiding the command of that name", n.Value)})
		}
	}
	// The body may run whenever the function is called, so it counts.
	w.stmt(x.Body)
}

func (w *walker) decl(x *syntax.DeclClause) {
	for _, a := range x.Args {
		w.assign(a)
	}
}

// assign walks an assignment's substitutions and judges variables that
// change what later commands run.
func (w *walker) assign(a *syntax.Assign) {
	if a == nil {
		return
	}
	if a.Value != nil {
		w.subsWord(a.Value)
	}
	if a.Array != nil {
		w.subs(a.Array)
	}
	if a.Index != nil {
		w.subs(a.Index)
	}
	if a.Name == nil {
		return
	}
	switch a.Name.Value {
	case "LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "DYLD_LIBRARY_PATH":
		w.add(finding{cat: Dangerous, score: scoreDangerous, reason: "sets " + a.Name.Value + ", loading other code into programs"})
	case "PATH", "BASH_ENV", "ENV", "IFS", "GIT_EXEC_PATH", "NODE_OPTIONS", "PERL5OPT", "RUBYOPT",
		"PYTHONSTARTUP", "PYTHONPATH":
		w.add(finding{cat: Moderate, score: scoreModerate, reason: "sets " + a.Name.Value + ", changing what later commands run"})
	default:
		if a.Value != nil {
			s, ok := w.literal(a.Value)
			if _, runs := envUses()[a.Name.Value]; runs {
				for _, f := range w.runsEnv(a.Name.Value, s, ok) {
					w.add(f)
				}
			} else if ok && !w.crude && w.depth < maxDepth-1 && len(s) >= 4 && len(s) <= 4096 && strings.ContainsAny(s, " \t;|&") {
				// GIT_CONFIG_VALUE_0='rm -rf ~', PS1='$(rm -rf ~)': a value
				// that is a dangerous command line counts wherever it stands.
				if fs := w.probe(s); len(fs) > 0 {
					w.add(finding{cat: Moderate, score: scoreModerate, reason: a.Name.Value + " is set to a command line"})
					for _, f := range fs {
						w.add(f)
					}
				}
			}
		}
	}
}

func (w *walker) call(ce *syntax.CallExpr, in stdin) {
	for _, a := range ce.Assigns {
		w.assign(a)
	}
	for _, word := range ce.Args {
		w.subsWord(word)
	}
	if len(ce.Args) == 0 {
		return // assignments only
	}
	for _, argv := range w.expandArgs(ce.Args) {
		w.simple(argv, in)
	}
}

// stdin is what a command reads on its standard input, as far as the line
// shows it.
type stdin struct {
	text  string // a here-document's or here-string's text
	known bool   // text is set
	file  string // read from this file (< file)
	net   bool   // read from a process substitution that fetches from the network
	redir bool   // stdin is redirected: not the pipe, not the terminal
	// secret names a secret-named variable the here-document or
	// here-string expands.
	secret string
}

// redirects judges a statement's redirections and returns what its stdin is.
func (w *walker) redirects(rs []*syntax.Redirect) stdin {
	var in stdin
	for _, r := range rs {
		w.subsWord(r.Word)
		w.subsWord(r.Hdoc)
		toStdin := r.N == nil || r.N.Value == "0"
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			in = stdin{text: w.hdocText(r), known: true, redir: true}
			if r.Hdoc != nil {
				in.secret = secretParam(r.Hdoc)
			}
		case syntax.WordHdoc:
			in = stdin{text: w.wordText(r.Word) + "\n", known: true, redir: true, secret: secretParam(r.Word)}
		case syntax.RdrIn:
			t := w.wordField(r.Word)
			w.checkTarget(t, false, false)
			if toStdin {
				in = stdin{file: t.s, net: fetchesNetwork(r.Word), redir: true}
			}
		case syntax.DplIn, syntax.DplOut:
			t := w.wordField(r.Word)
			if isFD(t.s) {
				if r.N != nil && r.N.Value == "0" || r.Op == syntax.DplIn && r.N == nil {
					in = stdin{redir: true} // stdin is another descriptor: 0>&1, <&3
				}
				continue
			}
			w.checkTarget(t, r.Op == syntax.DplOut, false)
		case syntax.RdrInOut:
			t := w.wordField(r.Word)
			w.checkTarget(t, true, true)
			if toStdin {
				in = stdin{file: t.s, redir: true}
			}
		default:
			t := w.wordField(r.Word)
			w.checkTarget(t, true, r.Op == syntax.AppOut || r.Op == syntax.AppAll || r.Op == syntax.AppClob || r.Op == syntax.AppAllClob)
		}
	}
	return in
}

func isFD(s string) bool {
	if s == "-" {
		return true
	}
	s = strings.TrimSuffix(s, "-")
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// checkTarget judges a redirection's target: written (write) or read.
func (w *walker) checkTarget(t field, write, appendOnly bool) {
	p := w.c.normPath(t.s)
	if isNetDevice(p) {
		w.add(finding{cat: Blocked, score: scoreBlocked, reason: "opens a network connection through " + p + ", the way reverse shells do"})
		return
	}
	if w.touchesProtected(t) {
		w.add(finding{cat: Blocked, score: scoreBlocked, reason: "touches Portcullis's own files: " + t.s})
		return
	}
	if !write {
		if w.isSecret(t) {
			w.add(finding{cat: Dangerous, score: scoreDangerous + 5, reason: "reads a secret file: " + t.s})
		} else if isDiskDevice(p) {
			w.add(finding{cat: Dangerous, score: scoreDangerous + 5, reason: "reads the raw disk device " + p + ", secrets and all"})
		}
		return
	}
	switch {
	case harmlessDevice(p):
	case isDiskDevice(p):
		w.add(finding{cat: Dangerous, score: scoreCatastrophe, irreversible: true, reason: "writes straight to the disk device " + p})
	case isStartupFile(p):
		w.add(finding{cat: Dangerous, score: scoreDangerHigh, reason: "changes " + t.s + ", which runs or grants access at every login"})
	case isSystemPath(p):
		if appendOnly {
			w.add(finding{cat: Dangerous, score: scoreDangerHigh, reason: "appends to the system file " + t.s})
		} else {
			w.add(finding{cat: Dangerous, score: scoreDestroy - 5, irreversible: true, reason: "overwrites the system file " + t.s})
		}
	case !t.static && t.s == "":
		w.add(finding{cat: Moderate, score: scoreWrite, reason: "writes to a file named at run time"})
	default:
		w.add(finding{cat: Moderate, score: scoreWrite, reason: "writes to the file " + t.s})
	}
}

// stageInfo is what the commands of one pipeline stage do, for judging the
// pipeline as a whole.
type stageInfo struct {
	net      bool   // fetches from the network
	decoder  bool   // decodes hidden text (base64 -d)
	netTool  bool   // holds a raw network connection (nc, socat)
	shell    bool   // a shell (or interpreter) reads code from the pipe
	shellI   bool   // an interactive shell (sh -i)
	sink     string // the program reading code from the pipe
	sinkKind int    // what the sink reads: sinkShell, sinkInterp, sinkSQL
	text     string // the stage's output, when it is one echo of literal text
	hasText  bool
	simple   int  // simple commands in the stage
	lists    bool // lists the files of the home directory, the root or a system path (find ~)
	deletes  bool // deletes the files named on its input (xargs rm)
}

const (
	sinkNone = iota
	sinkShell
	sinkInterp
	sinkSQL
)

func (s *stageInfo) merge(o *stageInfo) {
	s.net = s.net || o.net
	s.decoder = s.decoder || o.decoder
	s.netTool = s.netTool || o.netTool
	s.shellI = s.shellI || o.shellI
	s.lists = s.lists || o.lists
	s.deletes = s.deletes || o.deletes
	if o.shell && !s.shell {
		s.shell, s.sink, s.sinkKind = true, o.sink, o.sinkKind
	}
	if o.hasText && s.simple == 0 {
		s.text, s.hasText = o.text, true
	}
	s.simple += max(o.simple, 1)
}

func flattenPipe(b *syntax.BinaryCmd, out []*syntax.Stmt) []*syntax.Stmt {
	if x, ok := b.X.Cmd.(*syntax.BinaryCmd); ok && (x.Op == syntax.Pipe || x.Op == syntax.PipeAll) && len(b.X.Redirs) == 0 {
		out = flattenPipe(x, out)
	} else {
		out = append(out, b.X)
	}
	if y, ok := b.Y.Cmd.(*syntax.BinaryCmd); ok && (y.Op == syntax.Pipe || y.Op == syntax.PipeAll) && len(b.Y.Redirs) == 0 {
		return flattenPipe(y, out)
	}
	return append(out, b.Y)
}

func (w *walker) pipeline(b *syntax.BinaryCmd) {
	stages := flattenPipe(b, nil)
	infos := make([]stageInfo, len(stages))
	outer := w.stage
	for i, s := range stages {
		w.stage = &infos[i]
		w.stmt(s)
	}
	w.stage = outer
	w.pipeRisks(infos)
	if outer != nil {
		for i := range infos {
			outer.merge(&infos[i])
		}
	}
}

// pipeRisks judges what flows between the stages of a pipeline: code from
// the network or decoded from hiding into a shell, literal text into a
// shell (parsed in turn), a shell wired to a network connection.
func (w *walker) pipeRisks(infos []stageInfo) {
	var shellAt, netToolAt = -1, -1
	listed := false
	for j := range infos {
		sink := &infos[j]
		if sink.deletes && listed {
			w.add(finding{cat: Dangerous, score: scoreCatastrophe, irreversible: true, reason: "deletes every file listed from the home directory, the root or a system path"})
		}
		listed = listed || sink.lists
		if sink.shell || sink.shellI {
			shellAt = j
		}
		if sink.netTool {
			netToolAt = j
		}
		if !sink.shell || j == 0 {
			continue
		}
		var net, dec bool
		for i := range j {
			net = net || infos[i].net
			dec = dec || infos[i].decoder
		}
		prev := &infos[j-1]
		switch {
		case net && sink.sinkKind == sinkSQL:
			w.add(finding{cat: Dangerous, score: scoreDangerHigh, reason: "pipes SQL downloaded from the network into " + sink.sink})
		case net:
			w.add(finding{cat: Dangerous, score: scoreDangerHigh + 5, reason: "pipes code downloaded from the network into " + sink.sink})
		case dec:
			w.add(finding{cat: Dangerous, score: scoreDangerHigh + 5, reason: "pipes decoded, hidden code into " + sink.sink})
		case prev.hasText && prev.simple == 1:
			switch sink.sinkKind {
			case sinkShell:
				w.nested(prev.text)
			case sinkInterp:
				w.add(inlineCode(sink.sink, prev.text))
			case sinkSQL:
				w.add(sqlFinding(sink.sink, prev.text))
			}
		case sink.sinkKind == sinkSQL:
			w.add(finding{cat: Moderate, score: scoreModerateHigh, reason: sink.sink + " runs SQL read from a pipe"})
		default:
			w.add(finding{cat: Moderate, score: scoreModerateHigh, reason: sink.sink + " runs code read from a pipe"})
		}
	}
	if shellAt >= 0 && netToolAt >= 0 && shellAt != netToolAt {
		w.add(finding{cat: Blocked, score: scoreBlocked, reason: "reverse shell: a shell wired to a network connection"})
	}
}

// collectVars records every literal value each variable is given in f, and
// every word a for loop iterates over.
func (w *walker) collectVars(f *syntax.File) {
	syntax.Walk(f, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.Assign:
			if x.Name != nil && x.Value != nil && x.Array == nil && x.Index == nil {
				if s, ok := w.literal(x.Value); ok {
					w.addVar(x.Name.Value, s)
					if x.Name.Value == "IFS" && len(w.ifs) < 16 {
						w.ifs += s
					}
				}
			}
			if x.Name != nil && x.Array != nil {
				var elems []string
				for _, e := range x.Array.Elems {
					if e.Value == nil {
						continue
					}
					if s, ok := w.literal(e.Value); ok && len(elems) < maxFields {
						elems = append(elems, s)
					}
				}
				if w.arrays == nil {
					w.arrays = map[string][]string{}
				}
				w.arrays[x.Name.Value] = elems
			}
		case *syntax.CallExpr:
			// set -- words: the positional parameters "$@" expands to.
			if len(x.Args) > 1 && x.Args[0].Lit() == "set" && x.Args[1].Lit() == "--" {
				var elems []string
				for _, a := range x.Args[2:] {
					if s, ok := w.literal(a); ok && len(elems) < maxFields {
						elems = append(elems, s)
					}
				}
				if w.arrays == nil {
					w.arrays = map[string][]string{}
				}
				w.arrays["@"] = elems
			}
		case *syntax.WordIter:
			if x.Name != nil {
				for _, it := range x.Items {
					if s, ok := w.literal(it); ok {
						w.addVar(x.Name.Value, s)
					}
				}
			}
		}
		return true
	})
}

func (w *walker) addVar(name, value string) {
	if w.vars == nil {
		w.vars = map[string][]string{}
	}
	vs := w.vars[name]
	if len(vs) >= maxAlts {
		return
	}
	for _, v := range vs {
		if v == value {
			return
		}
	}
	w.vars[name] = append(vs, value)
}

// fetchesNetwork reports whether a word's substitutions run a program that
// fetches from the network ($(curl ...), <(wget ...)).
func fetchesNetwork(word *syntax.Word) bool {
	if word == nil {
		return false
	}
	found := false
	syntax.Walk(word, func(n syntax.Node) bool {
		if found {
			return false
		}
		ce, ok := n.(*syntax.CallExpr)
		if !ok {
			return true
		}
		for _, a := range ce.Args {
			if netFetchers()[commandName(a.Lit())] {
				found = true
			}
		}
		return true
	})
	return found
}

// decodes reports whether a word's substitutions decode hidden text
// ($(echo ... | base64 -d)).
func decodes(word *syntax.Word) bool {
	if word == nil {
		return false
	}
	found := false
	syntax.Walk(word, func(n syntax.Node) bool {
		ce, ok := n.(*syntax.CallExpr)
		if !ok || found {
			return !found
		}
		name := ""
		for _, a := range ce.Args {
			lit := a.Lit()
			if name == "" {
				name = commandName(lit)
				if name == "uudecode" || name == "rev" {
					found = true
				}
				continue
			}
			switch {
			case (name == "base64" || name == "base32" || name == "basenc" || name == "openssl") && (lit == "-d" || lit == "--decode" || lit == "-D"),
				name == "xxd" && strings.HasPrefix(lit, "-r"):
				found = true
			}
		}
		return !found
	})
	return found
}

// hasSubst reports whether a word holds a command or process substitution.
func hasSubst(word *syntax.Word) bool {
	if word == nil {
		return false
	}
	found := false
	syntax.Walk(word, func(n syntax.Node) bool {
		switch n.(type) {
		case *syntax.CmdSubst, *syntax.ProcSubst:
			found = true
		}
		return !found
	})
	return found
}
