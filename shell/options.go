package shell

import (
	"slices"
	"strings"
)

// opt is one option read from a command line.
type opt struct {
	name string // "-x" or "--long"
	val  string
	f    field // the word holding the value, when it was separate
}

// scanOpts reads options from argv[from:] up to the first operand; "--"
// ends them. shortVal lists the short options that take a value (attached,
// -oL, or as the next word); longVal the long options that take the next
// word as value (--opt=value always works). It returns the options and the
// index in argv of the first operand.
func scanOpts(argv []field, from int, shortVal string, longVal ...string) ([]opt, int) {
	var opts []opt
	i := from
	for i < len(argv) {
		a := argv[i].s
		if a == "--" {
			return opts, i + 1
		}
		if len(a) < 2 || a[0] != '-' {
			return opts, i
		}
		if strings.HasPrefix(a, "--") {
			name, val, hasEq := strings.Cut(a, "=")
			o := opt{name: name, val: val}
			if !hasEq && slices.Contains(longVal, name) && i+1 < len(argv) {
				i++
				o.val, o.f = argv[i].s, argv[i]
			}
			opts = append(opts, o)
			i++
			continue
		}
		for j := 1; j < len(a); j++ {
			ch := a[j]
			if strings.IndexByte(shortVal, ch) < 0 {
				opts = append(opts, opt{name: "-" + string(ch)})
				continue
			}
			o := opt{name: "-" + string(ch), val: a[j+1:]}
			if o.val == "" && i+1 < len(argv) {
				i++
				o.val, o.f = argv[i].s, argv[i]
			} else {
				o.f = field{s: o.val, id: -1, static: argv[i].static}
			}
			opts = append(opts, o)
			break
		}
		i++
	}
	return opts, i
}

// has reports whether any of the named options was given.
func has(opts []opt, names ...string) bool {
	for _, o := range opts {
		if slices.Contains(names, o.name) {
			return true
		}
	}
	return false
}

// value returns the value of the last of the named options given.
func value(opts []opt, names ...string) (opt, bool) {
	var found opt
	ok := false
	for _, o := range opts {
		if slices.Contains(names, o.name) {
			found, ok = o, true
		}
	}
	return found, ok
}

// flagged reports, reading every argument before "--" wherever it stands,
// whether a short option letter in letters (in any cluster: -rf, -fr) or
// one of the long options was given. It suits commands whose options take
// no values.
func flagged(args []field, letters string, long ...string) bool {
	for _, f := range args {
		a := f.s
		if a == "--" {
			return false
		}
		if strings.HasPrefix(a, "--") {
			name, _, _ := strings.Cut(a, "=")
			if slices.Contains(long, name) {
				return true
			}
			continue
		}
		if len(a) > 1 && a[0] == '-' && letters != "" && strings.ContainsAny(a[1:], letters) {
			return true
		}
	}
	return false
}

// operands returns the arguments that are not options, reading options
// wherever they stand (GNU style) and everything after "--" as operands.
func operands(args []field) []field {
	var out []field
	for i, f := range args {
		if f.s == "--" {
			return append(out, args[i+1:]...)
		}
		if len(f.s) > 1 && f.s[0] == '-' {
			continue
		}
		out = append(out, f)
	}
	return out
}

// subcommand returns the first operand after options that take no value,
// and the index of the word after it.
func subcommand(argv []field, from int, shortVal string, longVal ...string) (string, int) {
	_, i := scanOpts(argv, from, shortVal, longVal...)
	if i < len(argv) {
		return argv[i].s, i + 1
	}
	return "", i
}

// scanAll reads options wherever they stand among the operands (GNU
// style): it returns the options and the operands. "--" ends the options.
func scanAll(argv []field, from int, shortVal string, longVal ...string) ([]opt, []field) {
	var opts []opt
	var ops []field
	i := from
	for i < len(argv) {
		more, next := scanOpts(argv, i, shortVal, longVal...)
		opts = append(opts, more...)
		if next > 0 && argv[next-1].s == "--" && next-1 >= i {
			return opts, append(ops, argv[next:]...)
		}
		if next >= len(argv) {
			break
		}
		ops = append(ops, argv[next])
		i = next + 1
	}
	return opts, ops
}
