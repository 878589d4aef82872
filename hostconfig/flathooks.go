package hostconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Cursor's and Copilot CLI's hook files share a shape: {"version": 1,
// "hooks": {"<event>": [<hook>, ...]}}, each hook an object naming its
// command (Cursor's "command", Copilot's "bash"), with no matcher groups.

// CursorHookEvents are the Cursor hooks Portcullis is installed on: the
// ones that can block a call before it runs. preToolUse is matched to the
// file-writing tools only (CursorWriteMatcher): shell commands, MCP calls
// and file reads have their own hooks, and one call is decided once.
var CursorHookEvents = []string{"beforeShellExecution", "beforeMCPExecution", "beforeReadFile", "preToolUse"}

// CursorWriteMatcher is the matcher of the preToolUse hook: Cursor's tools
// that write or delete files.
const CursorWriteMatcher = "Write|Edit|StrReplace|MultiEdit|Delete|EditNotebook"

// cursorKnownEvents are the hook names Cursor's documentation lists; a
// name outside them is ignored by Cursor without a word.
var cursorKnownEvents = []string{
	"sessionStart", "sessionEnd", "preToolUse", "postToolUse", "postToolUseFailure",
	"subagentStart", "subagentStop", "beforeShellExecution", "afterShellExecution",
	"beforeMCPExecution", "afterMCPExecution", "beforeReadFile", "afterFileEdit",
	"beforeSubmitPrompt", "preCompact", "stop", "afterAgentResponse", "afterAgentThought",
	"beforeTabFileRead", "afterTabFileEdit",
}

// CopilotHookFile is the name of the hook file Portcullis writes in
// Copilot CLI's hooks directory ($COPILOT_HOME/hooks, or a repository's
// .github/hooks).
const CopilotHookFile = "portcullis.json"

// flatHook is one hook to put in place: event, the hook object, and the
// key that holds its command.
type flatHook struct {
	event, key string
	entry      map[string]any
}

// mergeFlatHooks returns the hook file with each hook in place: replacing
// a Portcullis hook of host in the event's list, else appended. A file
// whose version is not 1 is refused; everything else keeps its place.
func mergeFlatHooks(data []byte, host, exe string, hooks []flatHook) ([]byte, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte(`{"version":1}`)
	}
	root, err := parseObject(data)
	if err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if raw, ok := root.get("version"); ok {
		if strings.TrimSpace(string(raw)) != "1" {
			return nil, fmt.Errorf(`"version" is %s: this is not the hooks format version 1 that Portcullis writes`, raw)
		}
	} else {
		root.set("version", json.RawMessage("1"))
	}
	all := &object{}
	if raw, ok := root.get("hooks"); ok {
		if all, err = parseObject(raw); err != nil {
			return nil, fmt.Errorf(`"hooks" is not an object: %w`, err)
		}
	}
	for _, h := range hooks {
		ours, err := marshal(h.entry)
		if err != nil {
			return nil, err
		}
		var list []json.RawMessage
		if raw, ok := all.get(h.event); ok {
			if err := json.Unmarshal(raw, &list); err != nil {
				return nil, fmt.Errorf(`"hooks.%s" is not a list: %w`, h.event, err)
			}
		}
		placed := false
		kept := list[:0:0]
		for _, item := range list {
			var m map[string]any
			command := ""
			if json.Unmarshal(item, &m) == nil {
				command, _ = m[h.key].(string)
			}
			if isPortcullisHook(command, exe, host) {
				if !placed {
					kept = append(kept, ours)
					placed = true
				}
				continue
			}
			kept = append(kept, item)
		}
		if !placed {
			kept = append(kept, ours)
		}
		b, err := marshal(kept)
		if err != nil {
			return nil, err
		}
		all.set(h.event, b)
	}
	root.set("hooks", all.marshal())
	return indent(root.marshal())
}

// installCursor merges Portcullis's hooks into Cursor's hooks.json (the
// project's .cursor/hooks.json or ~/.cursor/hooks.json): each blocking
// hook runs the command with "failClosed": true, so that a hook that
// crashes or times out blocks the call instead of letting it run.
func installCursor(path, command, exe string, timeout int) (Installed, error) {
	old, mode, err := readForUpdate(path)
	if err != nil {
		return Installed{}, err
	}
	var hooks []flatHook
	for _, ev := range CursorHookEvents {
		entry := map[string]any{"command": command, "timeout": timeout, "failClosed": true}
		if ev == "preToolUse" {
			entry["matcher"] = CursorWriteMatcher
		}
		hooks = append(hooks, flatHook{event: ev, key: "command", entry: entry})
	}
	updated, err := mergeFlatHooks(old, string(Cursor), exe, hooks)
	if err != nil {
		return Installed{}, fmt.Errorf("%s: %w", path, err)
	}
	changed, err := writeWithBackup(path, old, updated, mode)
	if err != nil {
		return Installed{}, err
	}
	return Installed{Files: []string{path}, Changed: changed, Command: command}, nil
}

// installCopilot writes Portcullis's preToolUse hook into its own file in
// Copilot CLI's hooks directory. A repository's hooks run only in a
// folder the user trusts: the install says so.
func installCopilot(path, command, exe string, timeout int) (Installed, error) {
	old, mode, err := readForUpdate(path)
	if err != nil {
		return Installed{}, err
	}
	entry := map[string]any{"type": "command", "bash": command, "timeoutSec": timeout}
	updated, err := mergeFlatHooks(old, string(Copilot), exe, []flatHook{{event: "preToolUse", key: "bash", entry: entry}})
	if err != nil {
		return Installed{}, fmt.Errorf("%s: %w", path, err)
	}
	changed, err := writeWithBackup(path, old, updated, mode)
	if err != nil {
		return Installed{}, err
	}
	res := Installed{Files: []string{path}, Changed: changed, Command: command}
	if filepath.Base(filepath.Dir(filepath.Dir(path))) != ".copilot" && strings.HasSuffix(filepath.Dir(path), filepath.Join(".github", "hooks")) {
		res.Notes = append(res.Notes, "Copilot CLI runs a repository's hooks only in a folder you trust (it asks when it starts there); until then, and in copilot -p without COPILOT_ALLOW_ALL=true, it skips them and every call runs unchecked. portcullis hook install copilot --user installs a hook Copilot runs in every folder.")
	}
	return res, nil
}

// flatHookFile is a Cursor or Copilot hook file as read.
type flatHookFile struct {
	Version *json.Number                `json:"version"`
	Hooks   map[string][]map[string]any `json:"hooks"`
}

func readFlatHookFile(file string) (flatHookFile, error) {
	var f flatHookFile
	data, err := os.ReadFile(file)
	if err != nil {
		return f, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("not a valid hooks file: %v", err)
	}
	return f, nil
}

// checkCursorHooks reports on each of Cursor's hooks.json files that
// exists: a version Cursor does not read, a hook name Cursor does not know
// (a misspelled one is ignored without a word), each blocking hook without
// Portcullis, and each Portcullis command (its binary, its policy, a
// probe).
func (e Env) checkCursorHooks(ctx context.Context, files []string, dir string, probe hookProbes) []Finding {
	var out []Finding
	for _, file := range unique(files) {
		if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
			continue
		}
		fix := "portcullis hook install cursor --user"
		if user := filepath.Join(e.Home, ".cursor", "hooks.json"); file != user {
			fix = "portcullis hook install cursor --project --dir " + projectOf(file)
		}
		hf, err := readFlatHookFile(file)
		if err != nil {
			out = append(out, Finding{Client: Cursor, File: file, Status: NotProtected, Why: []string{err.Error() + "; Cursor ignores the file"}, Fix: "fix the file by hand (a backup may be beside it, .bak), then: " + fix})
			continue
		}
		f := Finding{Client: Cursor, File: file, Status: Protected}
		if hf.Version == nil || hf.Version.String() != "1" {
			f.worsen(NotProtected, `"version" is not 1: Cursor does not read these hooks`, fix)
		}
		for _, name := range slices.Sorted(maps.Keys(hf.Hooks)) {
			if slices.Contains(cursorKnownEvents, name) {
				continue
			}
			near := nearestName(name, cursorKnownEvents)
			if near != "" && slices.Contains(CursorHookEvents, near) {
				f.worsen(NotProtected, fmt.Sprintf("%q is not a Cursor hook (did you mean %q?): Cursor ignores it without a word, and its hooks never run", name, near), "rename it to "+near+", or: "+fix)
			} else {
				f.Why = append(f.Why, fmt.Sprintf("%q is not a hook Cursor documents: Cursor ignores it", name))
			}
		}
		probed := map[string]bool{}
		for _, ev := range CursorHookEvents {
			var ours, others []string
			failClosed := true
			for _, h := range hf.Hooks[ev] {
				command, _ := h["command"].(string)
				if !strings.Contains(command, " hook "+string(Cursor)) {
					others = append(others, command)
					continue
				}
				ours = append(ours, command)
				if fc, _ := h["failClosed"].(bool); !fc {
					failClosed = false
				}
				if ev == "preToolUse" {
					if m, _ := h["matcher"].(string); m != "" && m != CursorWriteMatcher && m != "*" && m != ".*" {
						f.worsen(NotProtected, fmt.Sprintf("preToolUse runs the hook only for tools matching %q: file writes it misses run unchecked", m), fix)
					}
				}
			}
			switch {
			case len(ours) == 0 && len(others) > 0:
				f.worsen(NotProtected, fmt.Sprintf("%s runs %s, not Portcullis: those calls run unchecked", ev, strings.Join(quoteAll(others), ", ")), fix)
				continue
			case len(ours) == 0:
				f.worsen(NotProtected, fmt.Sprintf("no Portcullis hook on %s: those calls run unchecked", ev), fix)
				continue
			}
			if !failClosed {
				f.worsen(NotProtected, fmt.Sprintf(`the %s hook is not "failClosed": true: if it crashes or times out, Cursor runs the call`, ev), fix)
			}
			for _, command := range ours {
				if probed[command] {
					continue
				}
				probed[command] = true
				c := e.checkHookCommand(ctx, Cursor, file, command, dir, probe.forFile(e, Cursor, file))
				f.Command = c.Command
				f.DefaultPolicy = f.DefaultPolicy || c.DefaultPolicy
				cfix := fix
				if before, _, ok := strings.Cut(c.Fix, ", then: "); ok {
					cfix = before + ", then: " + fix // install the binary first
				}
				for _, why := range c.Why {
					f.worsen(c.Status, why, cfix)
				}
			}
		}
		out = append(out, f)
	}
	return out
}

// checkCopilotHooks reports on Copilot CLI's hook files: the user's
// ($COPILOT_HOME/hooks/*.json) and the project's (.github/hooks/*.json),
// the project's only where the user trusts the folder, since Copilot
// skips a repository's hooks until then.
func (e Env) checkCopilotHooks(ctx context.Context, project, dir string, probe hookProbes) []Finding {
	home := e.copilotHome()
	files, _ := filepath.Glob(filepath.Join(home, "hooks", "*.json"))
	var projectFiles []string
	if project != "" {
		projectFiles, _ = filepath.Glob(filepath.Join(project, ".github", "hooks", "*.json"))
	}
	sort.Strings(files)
	sort.Strings(projectFiles)
	var out []Finding
	found := false
	for _, file := range unique(append(files, projectFiles...)) {
		isProject := slices.Contains(projectFiles, file) && !slices.Contains(files, file)
		fix := "portcullis hook install copilot --user"
		hf, err := readFlatHookFile(file)
		if err != nil {
			out = append(out, Finding{Client: Copilot, File: file, Status: NotProtected, Why: []string{err.Error() + "; Copilot CLI ignores the file"}, Fix: "fix the file by hand (a backup may be beside it, .bak), then: " + fix})
			found = true
			continue
		}
		for _, h := range hf.Hooks["preToolUse"] {
			command, _ := h["bash"].(string)
			if !strings.Contains(command, " hook "+string(Copilot)) {
				continue
			}
			found = true
			f := e.checkHookCommand(ctx, Copilot, file, command, dir, probe.forFile(e, Copilot, file))
			if hf.Version == nil || hf.Version.String() != "1" {
				f.worsen(NotProtected, `"version" is not 1: Copilot CLI does not read these hooks`, fix)
			}
			if isProject {
				if trusted, why := e.copilotTrusts(project); !trusted {
					f.worsen(NotProtected, why, fix+" (a hook Copilot runs in every folder), or trust the folder when Copilot asks")
				} else {
					f.Why = append(f.Why, why)
				}
			}
			out = append(out, f)
		}
	}
	if !found && exists(home) {
		out = append(out, Finding{Client: Copilot, File: home, Status: NotProtected,
			Why: []string{"copilot is installed, and no Portcullis hook is in its hooks: its tools run unchecked"},
			Fix: "portcullis hook install copilot --user"})
	}
	return out
}

// copilotTrusts reports whether Copilot CLI trusts the folder (its
// config.json lists it, or a folder above it, in trustedFolders), with
// what was found.
func (e Env) copilotTrusts(folder string) (bool, string) {
	config := filepath.Join(e.copilotHome(), "config.json")
	data, err := os.ReadFile(config)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err.Error()
	}
	// config.json starts with // comments, which JSON does not have.
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "//") {
			lines = append(lines, l)
		}
	}
	var c struct {
		TrustedFolders []string `json:"trustedFolders"`
	}
	if body := strings.TrimSpace(strings.Join(lines, "\n")); body != "" {
		if err := json.Unmarshal([]byte(body), &c); err != nil {
			return false, fmt.Sprintf("%s does not parse (%v): Copilot CLI trusts no folder", config, err)
		}
	}
	for _, t := range c.TrustedFolders {
		if within(folder, t) {
			return true, fmt.Sprintf("Copilot CLI trusts %s (%s), so it runs the repository's hooks", t, config)
		}
	}
	return false, fmt.Sprintf("Copilot CLI does not trust %s (no trustedFolders entry in %s): it skips the repository's hooks without a word, and every call runs unchecked", folder, config)
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// nearestName is the name of names closest to s (case ignored): within
// three edits, one the start of the other (beforeShellExec), or the same
// letters in another order (beforeFileRead); "" when none is.
func nearestName(s string, names []string) string {
	best, bestD := "", 4
	ls := strings.ToLower(s)
	for _, n := range names {
		ln := strings.ToLower(n)
		d := editDistance(ls, ln)
		if len(ls) >= 6 && len(ln) >= 6 && (strings.HasPrefix(ln, ls) || strings.HasPrefix(ls, ln)) {
			d = min(d, 3)
		}
		if sameLetters(ls, ln) {
			d = min(d, 2) // the same words in another order: beforeFileRead
		}
		if d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func sameLetters(a, b string) bool {
	x, y := []byte(a), []byte(b)
	slices.Sort(x)
	slices.Sort(y)
	return bytes.Equal(x, y)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
