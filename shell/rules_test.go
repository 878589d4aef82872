package shell_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/shell"
)

func TestNewRejectsBadRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule portcullis.ShellRule
		want []string // substrings of the error
	}{
		{"empty pattern", portcullis.ShellRule{Decision: portcullis.ShellDeny, Line: 7},
			[]string{"shell.rules[1] (line 7)", "pattern is empty"}},
		{"empty alternatives", portcullis.ShellRule{Pattern: [][]string{{"git"}, {}}, Decision: portcullis.ShellDeny},
			[]string{"shell.rules[1]:", "position 1 lists no tokens"}},
		{"empty token", portcullis.ShellRule{Pattern: [][]string{{"git"}, {" "}}, Decision: portcullis.ShellDeny},
			[]string{"position 1 has an empty token"}},
		{"unknown decision", portcullis.ShellRule{Pattern: [][]string{{"git"}}, Decision: "maybe"},
			[]string{`unknown decision "maybe"`}},
		{"match fails", portcullis.ShellRule{Pattern: [][]string{{"git"}, {"push", "fetch"}}, Decision: portcullis.ShellConfirm, Line: 12,
			Match: []string{"git push origin main", "git pull"}},
			[]string{"shell.rules[1] (line 12)", `match example "git pull"`, "[git, [push, fetch]]"}},
		{"notMatch matches", portcullis.ShellRule{Pattern: [][]string{{"git"}, {"push"}}, Decision: portcullis.ShellDeny,
			NotMatch: []string{"git status", "sudo git push"}},
			[]string{"shell.rules[1]", `notMatch example "sudo git push" matches`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok := portcullis.ShellRule{Pattern: [][]string{{"ls"}}, Decision: portcullis.ShellAllow, Match: []string{"ls -la"}}
			_, err := shell.New(shell.Options{Rules: []portcullis.ShellRule{ok, tc.rule}})
			if err == nil {
				t.Fatalf("New(%+v) succeeded; want an error", tc.rule)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestRuleExamplesSeeThroughWrappers(t *testing.T) {
	_, err := shell.New(shell.Options{Rules: []portcullis.ShellRule{{
		Pattern:  [][]string{{"git"}, {"push", "fetch"}},
		Decision: portcullis.ShellConfirm,
		Match:    []string{"git push origin main", "sudo git push", "bash -c 'git fetch'", "git -C repo push", "/usr/bin/git fetch", "ls && git push"},
		NotMatch: []string{"git status", "echo git push", "git", "gitk push"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRules(t *testing.T) {
	rules := []portcullis.ShellRule{
		{Pattern: [][]string{{"curl"}}, Decision: portcullis.ShellDeny, Justification: "no network from agents"},
		{Pattern: [][]string{{"git"}, {"push", "fetch"}}, Decision: portcullis.ShellConfirm, Justification: "pushes change shared history"},
		{Pattern: [][]string{{"make"}}, Decision: portcullis.ShellAllow, Justification: "the Makefile is reviewed"},
		{Pattern: [][]string{{"rm"}}, Decision: portcullis.ShellAllow},
		{Pattern: [][]string{{"npm"}, {"install", "ci"}}, Decision: portcullis.ShellAllow, Justification: "lockfile installs"},
		{Pattern: [][]string{{"npm"}, {"install"}, {"-g"}}, Decision: portcullis.ShellDeny},
		{Pattern: [][]string{{"sudo"}}, Decision: portcullis.ShellDeny, Justification: "no root"},
		{Pattern: [][]string{{"terraform"}}, Decision: portcullis.ShellAllow, Justification: "terraform is fine"},
		{Pattern: [][]string{{"foo"}}, Decision: portcullis.ShellConfirm},
	}
	c := newClassifier(t, shell.Options{Rules: rules})
	for _, tc := range []struct {
		command string
		want    shell.Category
		reason  string // "" not checked
	}{
		{"curl https://example.com", shell.Blocked, "no network from agents"},
		{"timeout 5 curl https://example.com", shell.Blocked, "no network from agents"},
		{"git fetch", shell.Dangerous, "pushes change shared history"},
		{"git -C repo -c user.name=x push", shell.Dangerous, "pushes change shared history"},
		{"/usr/bin/git push", shell.Dangerous, ""},
		{"git status", shell.Safe, ""},
		{"make", shell.Safe, "the Makefile is reviewed"},
		{"make > build.log", shell.Moderate, "writes to the file build.log"},
		{"rm build.log", shell.Safe, "policy rule [rm]: allow"},
		{"rm -rf ../build", shell.Dangerous, "rm with -r and -f above the working directory (../build)"},
		{"rm -rf build", shell.Safe, "policy rule [rm]: allow"},
		{"npm install", shell.Safe, "lockfile installs"},
		{"npm install -g typescript", shell.Blocked, "policy rule [npm, install, -g]: deny"},
		{"npm install && foo", shell.Dangerous, "policy rule [foo]: confirm"},
		{"sudo ls", shell.Blocked, "no root"},
		{"terraform destroy", shell.Dangerous, "terraform destroy tears down infrastructure"},
		{"terraform apply", shell.Safe, "terraform is fine"},
		{"X=make; $X", shell.Moderate, "the command name comes from a variable or a substitution: make"},
	} {
		got := c.Classify(tc.command)
		if got.Category != tc.want {
			t.Errorf("Classify(%q) = %s %q; want %s", tc.command, got.Category, got.Reasons, tc.want)
		}
		if tc.reason != "" && !slices.Contains(got.Reasons, tc.reason) {
			t.Errorf("Classify(%q) reasons %q lack %q", tc.command, got.Reasons, tc.reason)
		}
	}
}

func TestProtectedPaths(t *testing.T) {
	c := newClassifier(t, shell.Options{
		ProtectedPaths: []string{"/srv/gate/policy.yaml", "/home/agent/.config/portcullis", "/opt/gate/gatebin", ""},
		Home:           "/home/agent/",
	})
	for _, tc := range []struct {
		command string
		want    shell.Category
	}{
		{"cat /srv/gate/policy.yaml", shell.Blocked},
		{"cat /srv/gate/./policy.yaml", shell.Blocked},
		{"cat /srv/gate/x/../policy.yaml", shell.Blocked},
		{"ls ~/.config/portcullis", shell.Blocked},
		{"rm $HOME/.config/portcullis/db", shell.Blocked},
		{"rm ${HOME}/.config/portcullis/db", shell.Blocked},
		{"rm /home/agent/.config/portcullis/db", shell.Blocked},
		{"rm -rf ~/.config/port*", shell.Blocked},
		{"cp x ~/.config/*/token", shell.Blocked},
		{"cat gate/policy.yaml", shell.Blocked},
		{"cd /srv && cat gate/policy.yaml", shell.Blocked},
		{"cd /srv/gate; vi policy.yaml", shell.Blocked},
		{"echo x > /srv/gate/policy.yaml", shell.Blocked},
		{"tee -a /srv/gate/policy.yaml < new", shell.Blocked},
		{"cp new --target-directory=/srv/gate/policy.yaml", shell.Blocked},
		{"docker run -v ~/.config/portcullis:/data alpine", shell.Blocked},
		{"/opt/gate/gatebin approve ch-1", shell.Blocked},
		{"/opt/gate/gatebin decide --policy p.yaml", shell.Safe},
		{"~/.config/portcullis/hook.sh", shell.Blocked},
		{"/opt/gate/other.sh", shell.Moderate},
		{"rm /opt/gate/gatebin", shell.Blocked},
		{"cat ~/.local/state/portcullis/token", shell.Blocked},
		{"cat $XDG_STATE_HOME/portcullis/token", shell.Blocked},
		// Not Portcullis's files.
		{"cat /srv/gate/policy.yaml.bak", shell.Safe},
		{"cat /srv/gate-old/policy.yaml", shell.Safe},
		{"cat policy.yaml", shell.Safe},
		{"ls ~/.config", shell.Safe},
		{"rm -rf ~/.config", shell.Dangerous},
		{"ls ~/src/portcullis", shell.Safe},
	} {
		got := c.Classify(tc.command)
		if got.Category != tc.want {
			t.Errorf("Classify(%q) = %s %q; want %s", tc.command, got.Category, got.Reasons, tc.want)
		}
	}
}

func TestWrappers(t *testing.T) {
	c := newClassifier(t, shell.Options{})
	inner := []string{"rm", "-rf", "/srv/data"}
	for _, command := range []string{
		"sudo rm -rf /srv/data",
		"sudo -u deploy -E -- rm -rf /srv/data",
		"sudo --user=deploy VAR=1 rm -rf /srv/data",
		"doas -u root rm -rf /srv/data",
		"env rm -rf /srv/data",
		"env -i -u HOME X=1 rm -rf /srv/data",
		"timeout 5 rm -rf /srv/data",
		"timeout -s KILL -k 1 5s rm -rf /srv/data",
		"nice rm -rf /srv/data",
		"nice -n 19 rm -rf /srv/data",
		"nice -10 rm -rf /srv/data",
		"nohup rm -rf /srv/data",
		"stdbuf -oL -e0 rm -rf /srv/data",
		"stdbuf -o L rm -rf /srv/data",
		"ionice -c 3 rm -rf /srv/data",
		"command rm -rf /srv/data",
		"command -p rm -rf /srv/data",
		"exec -a name rm -rf /srv/data",
		"builtin exec rm -rf /srv/data",
		"setsid -f rm -rf /srv/data",
		"xargs rm -rf /srv/data",
		"xargs -0 -n 1 -P4 -I{} rm -rf /srv/data",
		"sudo timeout 5 nice -n 5 env X=1 rm -rf /srv/data",
		"busybox rm -rf /srv/data",
		"flock /tmp/lock rm -rf /srv/data",
		"unshare -r rm -rf /srv/data",
		"strace -f -o trace.txt rm -rf /srv/data",
		"portcullis exec -- rm -rf /srv/data",
		"kubectl exec -it pod -- rm -rf /srv/data",
		"docker exec -u root web rm -rf /srv/data",
		"/usr/bin/time -v rm -rf /srv/data",
	} {
		got := c.Classify(command)
		if got.Category != shell.Dangerous || !got.Irreversible {
			t.Errorf("Classify(%q) = %s irreversible=%v %q; want dangerous and irreversible", command, got.Category, got.Irreversible, got.Reasons)
		}
		found := false
		for _, cmd := range got.Commands {
			if strings.Join(cmd, " ") == strings.Join(inner, " ") {
				found = true
			}
		}
		if !found {
			t.Errorf("Classify(%q) commands %q lack %q", command, got.Commands, inner)
		}
	}
}

// quote single-quotes s for the shell.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func TestNestingDepth(t *testing.T) {
	c := newClassifier(t, shell.Options{})
	cmd := "ls"
	for depth := 1; depth <= 10; depth++ {
		cmd = "bash -c " + quote(cmd)
		got := c.Classify(cmd)
		switch {
		case depth <= 8 && got.Category != shell.Safe:
			t.Errorf("depth %d: Classify = %s %q; want safe", depth, got.Category, got.Reasons)
		case depth > 8 && (got.Category != shell.Dangerous || !slices.Contains(got.Reasons, "shell code nested more than 8 levels deep")):
			t.Errorf("depth %d: Classify = %s %q; want dangerous for nesting", depth, got.Category, got.Reasons)
		}
	}
	// Nesting in the syntax tree itself is walked to any depth.
	deep := strings.Repeat("$(", 200) + "rm -rf /" + strings.Repeat(")", 200)
	if got := c.Classify("echo " + deep); got.Category != shell.Dangerous {
		t.Errorf("Classify(200 nested substitutions) = %s; want dangerous", got.Category)
	}
}

func TestWorkBudget(t *testing.T) {
	c := newClassifier(t, shell.Options{})
	got := c.Classify(strings.Repeat("ls; ", 5000))
	if got.Category != shell.Dangerous || !slices.Contains(got.Reasons, "too complex to classify completely") {
		t.Errorf("Classify(5000 commands) = %s %q; want dangerous as too complex", got.Category, got.Reasons)
	}
	// Variables with many values multiply variants, within bounds.
	var b strings.Builder
	for i := range 20 {
		b.WriteString("X=v" + string(rune('a'+i)) + "; ")
	}
	b.WriteString("$X $X $X $X $X $X $X $X")
	if got := c.Classify(b.String()); got.Category != shell.Moderate {
		t.Errorf("Classify(many values) = %s %q; want moderate", got.Category, got.Reasons)
	}
}

func TestConcurrentClassify(t *testing.T) {
	c := newClassifier(t, shell.Options{Rules: []portcullis.ShellRule{{Pattern: [][]string{{"make"}}, Decision: portcullis.ShellAllow}}})
	entries := loadCorpus(t)
	done := make(chan bool)
	for g := range 4 {
		go func() {
			for i := g; i < len(entries); i += 4 {
				c.Classify(entries[i].Command)
			}
			done <- true
		}()
	}
	for range 4 {
		<-done
	}
}
