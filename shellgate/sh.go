package shellgate

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// ShellName is the name that makes the portcullis binary a login-shell
// wrapper: a link named portcullis-sh (or -portcullis-sh, as login(1)
// starts a login shell) gates every command it is given.
const ShellName = "portcullis-sh"

// Invoked reports whether a program started as argv0 is portcullis-sh,
// and whether as a login shell (a name starting with "-").
func Invoked(argv0 string) (ok, login bool) {
	base := filepath.Base(argv0)
	if strings.TrimPrefix(base, "-") != ShellName {
		return false, false
	}
	return true, strings.HasPrefix(base, "-")
}

// ParseShellArgs reads a shell's command line the way sh does, as far as
// portcullis-sh supports it: options (-l/--login, -e, -u, -x, -v, -o OPT,
// -i, --noprofile, --norc), -c and the command string. Anything it does
// not understand is refused: commands read from a file or from stdin, and
// positional arguments after the command string (which "$@" would run
// without the gate seeing them), are never run.
func ParseShellArgs(args []string) (Spec, error) {
	var s Spec
	c := false
	i := 0
options:
	for ; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			i++
			break options
		case a == "--login":
			s.Login = true
		case a == "--noprofile", a == "--norc":
		case a == "-o" || a == "+o":
			if i+1 >= len(args) {
				return s, fmt.Errorf("%s needs an option name", a)
			}
			s.ShellFlags = append(s.ShellFlags, a, args[i+1])
			i++
		case strings.HasPrefix(a, "-") && len(a) > 1 && !strings.HasPrefix(a, "--"):
			for _, f := range a[1:] {
				switch f {
				case 'c':
					c = true
				case 'l':
					s.Login = true
				case 'i':
					// Interactive: a command string runs once either way.
				case 'e', 'u', 'x', 'v':
					s.ShellFlags = append(s.ShellFlags, "-"+string(f))
				default:
					return s, fmt.Errorf("option -%c is not supported (portcullis-sh runs commands given with -c)", f)
				}
			}
		default:
			break options
		}
	}
	rest := args[i:]
	switch {
	case !c:
		return s, errors.New("portcullis-sh runs only commands given with -c 'COMMANDS'; an interactive shell or a script file is not gated")
	case len(rest) == 0:
		return s, errors.New("-c needs the commands to run")
	case len(rest) > 1:
		return s, errors.New("arguments after the -c commands are not supported: the gate would not see what \"$@\" runs")
	}
	s.Script, s.Shell = rest[0], true
	return s, nil
}
