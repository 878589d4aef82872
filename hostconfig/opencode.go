package hostconfig

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// opencode blocks a tool call through a plugin: a JavaScript module in a
// plugin directory (.opencode/plugin of the project, or the plugin
// directory of the user's opencode configuration, ~/.config/opencode)
// whose "tool.execute.before" hook throws. Portcullis's plugin runs the
// hook command with the event on stdin and throws unless the hook allows
// the call.

//go:embed opencode_plugin.js
var openCodePluginTemplate string

// OpenCodePluginName is the file name of Portcullis's opencode plugin.
const OpenCodePluginName = "portcullis.js"

// The lines of the plugin that hold its command and timeout.
const (
	openCodeCommandLine = "const COMMAND = "
	openCodeTimeoutLine = "const TIMEOUT_MS = "
)

// OpenCodePlugin is the plugin that runs command (the hook command's
// words, run without a shell) for every tool call, giving up after
// timeout seconds.
func OpenCodePlugin(command []string, timeout int) ([]byte, error) {
	if len(command) == 0 {
		return nil, errors.New("the hook command is empty")
	}
	words, err := json.Marshal(command)
	if err != nil {
		return nil, err
	}
	s := strings.Replace(openCodePluginTemplate, openCodeCommandLine+"/*PORTCULLIS-COMMAND*/ []", openCodeCommandLine+string(words), 1)
	s = strings.Replace(s, openCodeTimeoutLine+"/*PORTCULLIS-TIMEOUT*/ 0", openCodeTimeoutLine+strconv.Itoa(timeout*1000), 1)
	return []byte(s), nil
}

// ParseOpenCodePlugin reads the command and timeout (in seconds) of a
// plugin OpenCodePlugin wrote. It fails on any other file, and on one that
// was changed since it was written.
func ParseOpenCodePlugin(data []byte) (command []string, timeout int, err error) {
	var cmdJSON, timeoutText string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, openCodeCommandLine); ok && cmdJSON == "" {
			cmdJSON = strings.TrimSuffix(v, ";")
		}
		if v, ok := strings.CutPrefix(line, openCodeTimeoutLine); ok && timeoutText == "" {
			timeoutText = strings.TrimSuffix(v, ";")
		}
	}
	if cmdJSON == "" || timeoutText == "" {
		return nil, 0, errors.New("not Portcullis's plugin (no command in it)")
	}
	if err := json.Unmarshal([]byte(cmdJSON), &command); err != nil || len(command) == 0 {
		return nil, 0, fmt.Errorf("not Portcullis's plugin (its command %s does not read)", cmdJSON)
	}
	ms, err := strconv.Atoi(timeoutText)
	if err != nil || ms <= 0 || ms%1000 != 0 {
		return nil, 0, fmt.Errorf("not Portcullis's plugin (its timeout %s does not read)", timeoutText)
	}
	want, err := OpenCodePlugin(command, ms/1000)
	if err != nil {
		return nil, 0, err
	}
	if !bytes.Equal(want, data) {
		return command, ms / 1000, errors.New("the plugin was changed since Portcullis wrote it: it may not block what Portcullis denies")
	}
	return command, ms / 1000, nil
}

// openCodeDir is opencode's configuration directory for the user:
// $XDG_CONFIG_HOME/opencode, else ~/.config/opencode, on every system.
func (e Env) openCodeDir() string {
	if e.OpenCodeDir != "" {
		return e.OpenCodeDir
	}
	return filepath.Join(e.Home, ".config", "opencode")
}

// installOpenCode writes Portcullis's plugin to path.
func (e Env) installOpenCode(path string, h Hook, command string, timeout int) (Installed, error) {
	plugin, err := OpenCodePlugin(h.Command, timeout)
	if err != nil {
		return Installed{}, err
	}
	old, mode, err := readForUpdate(path)
	if err != nil {
		return Installed{}, err
	}
	if old != nil {
		if words, _, _ := ParseOpenCodePlugin(old); words == nil {
			return Installed{}, fmt.Errorf("%s exists and is not Portcullis's plugin: move it away, then install again", path)
		}
	}
	changed, err := writeWithBackup(path, old, plugin, mode)
	if err != nil {
		return Installed{}, err
	}
	return Installed{Files: []string{path}, Changed: changed, Command: command}, nil
}

// checkOpenCode reports on Portcullis's plugin in each of opencode's
// plugin directories, and on opencode as a whole when none holds it
// although opencode is installed (its configuration directory exists).
func (e Env) checkOpenCode(ctx context.Context, project, dir string, probe hookProbes) []Finding {
	dirs := []string{e.openCodeDir()}
	if project != "" {
		dirs = append(dirs, filepath.Join(project, ".opencode"))
	}
	var out []Finding
	for _, d := range unique(dirs) {
		for _, sub := range []string{"plugin", "plugins"} {
			file := filepath.Join(d, sub, OpenCodePluginName)
			data, err := os.ReadFile(file)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			fix := e.fixInit(OpenCode, file)
			if err != nil {
				out = append(out, Finding{Client: OpenCode, File: file, Status: NotProtected, Why: []string{err.Error()}, Fix: "make the file readable, then: portcullis doctor"})
				continue
			}
			words, _, perr := ParseOpenCodePlugin(data)
			if words == nil {
				out = append(out, Finding{Client: OpenCode, File: file, Status: NotProtected,
					Why: []string{perr.Error() + ": opencode runs it, and it may let calls through"}, Fix: fix})
				continue
			}
			command, err := ShellJoin(words)
			if err != nil {
				out = append(out, Finding{Client: OpenCode, File: file, Status: NotProtected, Why: []string{err.Error()}, Fix: fix})
				continue
			}
			f := e.checkHookCommand(ctx, OpenCode, file, command, dir, probe.forFile(e, OpenCode, file))
			if perr != nil {
				f.worsen(NotProtected, perr.Error(), fix)
			} else {
				f.Why = append([]string{"the plugin is Portcullis's, as installed"}, f.Why...)
			}
			if len(words) < 3 || words[1] != "hook" || words[2] != string(OpenCode) {
				f.worsen(NotProtected, fmt.Sprintf("the plugin runs %q, not portcullis hook opencode", command), fix)
			}
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		for _, d := range dirs {
			if exists(d) {
				out = append(out, Finding{Client: OpenCode, File: d, Status: NotProtected,
					Why: []string{fmt.Sprintf("opencode is configured in %s, and no Portcullis plugin is in its plugin directories: its tools run unchecked", d)},
					Fix: e.fixInit(OpenCode, "")})
				break
			}
		}
	}
	return out
}
