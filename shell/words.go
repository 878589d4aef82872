package shell

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// field is one word of a simple command after expansion, as far as it can
// be known without running anything.
type field struct {
	s       string       // the value; the source text for parts known only at run time
	id      int          // index of the word in its simple command; -1 when synthesized
	static  bool         // the value is fully known
	glob    bool         // holds unquoted glob characters
	fromVar bool         // comes from a variable or a command substitution
	word    *syntax.Word // the word it came from; nil when synthesized
}

func synth(s string) field { return field{s: s, id: -1, static: true} }

func strs(fs []field) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.s
	}
	return out
}

// expandArgs expands a simple command's words into the argv variants the
// command may run with: usually one, more when a word uses a variable that
// is given several values in the line.
func (w *walker) expandArgs(words []*syntax.Word) [][]field {
	variants := [][]field{make([]field, 0, len(words))}
	for i, word := range words {
		if lit, ok := plainLit(word); ok {
			// The common case: one plain literal, the same in every variant.
			for v := range variants {
				variants[v] = append(variants[v], field{s: lit, id: i, static: true, word: word})
			}
			continue
		}
		alts := w.expandWord(word)
		for a := range alts {
			for k := range alts[a] {
				alts[a][k].id = i
				alts[a][k].word = word
			}
		}
		if len(alts) == 1 {
			for v := range variants {
				variants[v] = append(variants[v], alts[0]...)
			}
			continue
		}
		var next [][]field
		for _, v := range variants {
			for _, a := range alts {
				if len(next) == maxVariants {
					break
				}
				nv := make([]field, len(v), len(v)+len(a))
				copy(nv, v)
				next = append(next, append(nv, a...))
			}
		}
		variants = next
	}
	return variants
}

// plainLit returns a word's value when it is one literal with nothing to
// expand: no escapes, braces or glob characters.
func plainLit(word *syntax.Word) (string, bool) {
	if word == nil || len(word.Parts) != 1 {
		return "", false
	}
	l, ok := word.Parts[0].(*syntax.Lit)
	if !ok || strings.ContainsAny(l.Value, "\\{*?[") {
		return "", false
	}
	return l.Value, true
}

// wordBuilder builds the fields of one word.
type wordBuilder struct {
	fields  []field
	cur     strings.Builder
	open    bool // a field has started, even an empty quoted one
	static  bool
	glob    bool
	fromVar bool
}

func newBuilder() *wordBuilder { return &wordBuilder{static: true} }

func (b *wordBuilder) clone() *wordBuilder {
	n := &wordBuilder{fields: slices.Clone(b.fields), open: b.open, static: b.static, glob: b.glob, fromVar: b.fromVar}
	n.cur.WriteString(b.cur.String())
	return n
}

func (b *wordBuilder) lit(s string) {
	b.cur.WriteString(s)
	b.open = true
}

func (b *wordBuilder) dyn(raw string) {
	b.lit(raw)
	b.static = false
}

func (b *wordBuilder) flush() {
	if !b.open {
		return
	}
	b.fields = append(b.fields, field{s: b.cur.String(), static: b.static, glob: b.glob, fromVar: b.fromVar})
	b.cur.Reset()
	b.open, b.static, b.glob, b.fromVar = false, true, false, false
}

// split appends the unquoted result of an expansion, which the shell splits
// into fields at blanks.
func (b *wordBuilder) split(s string) {
	b.fromVar = true
	if s == "" {
		return
	}
	parts := strings.Fields(s)
	if len(parts) == 0 {
		b.flush()
		return
	}
	if isBlank(s[0]) {
		b.flush()
	}
	for i, p := range parts {
		if i > 0 {
			b.flush()
		}
		b.lit(p)
		b.fromVar = true
		if hasGlob(p) {
			b.glob = true
		}
	}
	if isBlank(s[len(s)-1]) {
		b.flush()
	}
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' }

// expandWord returns the alternatives a word may expand to, each a list of
// fields.
func (w *walker) expandWord(word *syntax.Word) [][]field {
	if word == nil || len(word.Parts) == 0 {
		return [][]field{nil}
	}
	if lit, ok := plainLit(word); ok {
		return [][]field{{{s: lit, static: true}}}
	}
	if fs, ok := w.braces(word); ok {
		return [][]field{fs}
	}
	bs := w.parts([]*wordBuilder{newBuilder()}, word.Parts, false)
	out := make([][]field, 0, len(bs))
	for _, b := range bs {
		b.flush()
		out = append(out, b.fields)
	}
	return out
}

// wordField expands a word that stands for one thing (a redirect target)
// into one field, joining what a split would separate.
func (w *walker) wordField(word *syntax.Word) field {
	if word == nil || len(word.Parts) == 0 {
		return field{id: -1}
	}
	alts := w.expandWord(word)
	f := field{id: -1, static: true, word: word}
	var parts []string
	for _, x := range alts[0] {
		parts = append(parts, x.s)
		f.static = f.static && x.static
		f.glob = f.glob || x.glob
	}
	f.s = strings.Join(parts, " ")
	return f
}

// wordText renders a word as text: its value where known, its source
// where not.
func (w *walker) wordText(word *syntax.Word) string {
	return w.wordField(word).s
}

// literal returns a word's value when it holds no expansion at all.
func (w *walker) literal(word *syntax.Word) (string, bool) {
	var b strings.Builder
	if !literalParts(&b, word.Parts, false) {
		return "", false
	}
	return b.String(), true
}

func literalParts(b *strings.Builder, parts []syntax.WordPart, quoted bool) bool {
	for _, p := range parts {
		switch x := p.(type) {
		case *syntax.Lit:
			if quoted {
				b.WriteString(unescapeDQ(x.Value))
			} else {
				b.WriteString(unescape(x.Value))
			}
		case *syntax.SglQuoted:
			if x.Dollar {
				b.WriteString(ansiC(x.Value))
			} else {
				b.WriteString(x.Value)
			}
		case *syntax.DblQuoted:
			if !literalParts(b, x.Parts, true) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func (w *walker) parts(bs []*wordBuilder, parts []syntax.WordPart, quoted bool) []*wordBuilder {
	each := func(f func(b *wordBuilder)) {
		for _, b := range bs {
			f(b)
		}
	}
	for _, p := range parts {
		switch x := p.(type) {
		case *syntax.Lit:
			if quoted {
				v := unescapeDQ(x.Value)
				each(func(b *wordBuilder) { b.lit(v) })
			} else {
				v := unescape(x.Value)
				g := hasGlob(x.Value)
				each(func(b *wordBuilder) {
					b.lit(v)
					b.glob = b.glob || g
				})
			}
		case *syntax.SglQuoted:
			v := x.Value
			if x.Dollar {
				v = ansiC(v)
			}
			each(func(b *wordBuilder) { b.lit(v) })
		case *syntax.DblQuoted:
			each(func(b *wordBuilder) { b.open = true })
			bs = w.parts(bs, x.Parts, true)
		case *syntax.ParamExp:
			cands, split := w.paramValues(x)
			if cands == nil {
				raw := w.paramRaw(x)
				each(func(b *wordBuilder) { b.dyn(raw) })
				continue
			}
			bs = w.fork(bs, cands, quoted && !split)
		case *syntax.CmdSubst:
			if out, ok := w.substOutput(x); ok {
				bs = w.fork(bs, []string{out}, quoted)
				continue
			}
			raw := w.raw(x)
			each(func(b *wordBuilder) { b.dyn(raw) })
		case *syntax.ExtGlob:
			raw := w.raw(x)
			each(func(b *wordBuilder) {
				b.dyn(raw)
				b.glob = true
			})
		default: // arithmetic, process substitution
			raw := w.raw(p)
			each(func(b *wordBuilder) { b.dyn(raw) })
		}
	}
	return bs
}

// fork continues every builder with each of the values an expansion may
// take, up to maxAlts builders.
func (w *walker) fork(bs []*wordBuilder, values []string, quoted bool) []*wordBuilder {
	out := make([]*wordBuilder, 0, len(bs)*len(values))
	for _, b := range bs {
		for i, v := range values {
			if len(out) == maxAlts {
				break
			}
			nb := b
			if i < len(values)-1 {
				nb = b.clone()
			}
			if quoted {
				nb.lit(v)
				nb.fromVar = true
			} else {
				nb.split(w.ifsBlanks(v))
			}
			out = append(out, nb)
		}
	}
	return out
}

// paramValues returns the values a parameter expansion may take, from the
// literal assignments in the line and a ${x:-default}; nil when nothing is
// known. split is set for "${array[@]}", which yields one field per element
// even inside quotes.
func (w *walker) paramValues(p *syntax.ParamExp) (vals []string, split bool) {
	if p.Param == nil || p.Excl || p.Length || p.Width || p.IsSet || p.Slice != nil || p.Repl != nil ||
		p.Names != 0 || p.NestedParam != nil || len(p.Modifiers) > 0 {
		return nil, false
	}
	name := p.Param.Value
	if p.Index != nil {
		elems, ok := w.arrays[name]
		idx, isWord := p.Index.(*syntax.Word)
		if !ok || !isWord || p.Exp != nil {
			return nil, false
		}
		switch i := idx.Lit(); i {
		case "@", "*":
			return []string{strings.Join(elems, " ")}, true
		default:
			n, err := strconv.Atoi(i)
			if err != nil || n < 0 || n >= len(elems) {
				return nil, false
			}
			return []string{elems[n]}, false
		}
	}
	if name == "@" || name == "*" {
		// set -- rm -rf ~ gave the positional parameters literal values.
		if elems, ok := w.arrays["@"]; ok && p.Exp == nil {
			return []string{strings.Join(elems, " ")}, true
		}
		return nil, false
	}
	vals = w.vars[name]
	if len(vals) == 0 {
		if elems := w.arrays[name]; len(elems) > 0 {
			vals = elems[:1]
		} else if name == "IFS" {
			vals = []string{" "} // the default IFS splits words
		}
	}
	if p.Exp != nil {
		switch p.Exp.Op {
		case syntax.DefaultUnset, syntax.DefaultUnsetOrNull, syntax.AssignUnset, syntax.AssignUnsetOrNull:
			if p.Exp.Word == nil {
				return append(vals[:len(vals):len(vals)], ""), false
			}
			if s, ok := w.literal(p.Exp.Word); ok {
				return append(vals[:len(vals):len(vals)], s), false
			}
		}
		return nil, false
	}
	if len(vals) == 0 {
		return nil, false
	}
	return vals, false
}

// ifsBlanks turns the characters the line adds to IFS into blanks, so a
// value splits where the shell would split it.
func (w *walker) ifsBlanks(v string) string {
	if w.ifs == "" {
		return v
	}
	return strings.Map(func(r rune) rune {
		if strings.ContainsRune(w.ifs, r) {
			return ' '
		}
		return r
	}, v)
}

// paramRaw renders an unknown parameter expansion: $NAME for the simple
// forms, so that $HOME and ${HOME} look alike, the source otherwise.
func (w *walker) paramRaw(p *syntax.ParamExp) string {
	if p.Param != nil && p.Exp == nil && !p.Excl && !p.Length && p.Index == nil && p.Slice == nil && p.Repl == nil && len(p.Modifiers) == 0 && p.NestedParam == nil {
		return "$" + p.Param.Value
	}
	return w.raw(p)
}

// raw returns the source text of a node.
func (w *walker) raw(n syntax.Node) string {
	start, end := n.Pos(), n.End()
	if !start.IsValid() || !end.IsValid() || start.IsRecovered() || end.IsRecovered() {
		return "?"
	}
	s, e := int(start.Offset()), int(end.Offset())
	if s < 0 || e > len(w.src) || s >= e {
		return "?"
	}
	return w.src[s:e]
}

// substOutput returns what a command substitution prints when it is a
// single echo or printf of literal words: $(echo rm) is rm.
func (w *walker) substOutput(cs *syntax.CmdSubst) (string, bool) {
	if len(cs.Stmts) != 1 {
		return "", false
	}
	st := cs.Stmts[0]
	ce, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(st.Redirs) > 0 || len(ce.Assigns) > 0 || len(ce.Args) == 0 || st.Negated || st.Background {
		return "", false
	}
	args := make([]string, len(ce.Args))
	for i, a := range ce.Args {
		s, ok := w.literal(a)
		if !ok {
			return "", false
		}
		args[i] = s
	}
	out, ok := printed(args)
	if !ok {
		return "", false
	}
	return strings.TrimRight(out, "\n"), true
}

// printed returns what an echo or printf of literal arguments prints.
func printed(argv []string) (string, bool) {
	switch commandName(argv[0]) {
	case "echo":
		args := argv[1:]
		escapes, newline := false, true
		for len(args) > 0 && len(args[0]) > 1 && args[0][0] == '-' && strings.Trim(args[0][1:], "neE") == "" {
			for _, c := range args[0][1:] {
				switch c {
				case 'n':
					newline = false
				case 'e':
					escapes = true
				case 'E':
					escapes = false
				}
			}
			args = args[1:]
		}
		s := strings.Join(args, " ")
		if escapes {
			s = ansiC(s)
		}
		if newline {
			s += "\n"
		}
		return s, true
	case "printf":
		if len(argv) < 2 {
			return "", false
		}
		format := argv[1]
		switch {
		case format == "%s":
			return strings.Join(argv[2:], ""), true
		case format == "%s\n" || format == `%s\n`:
			return strings.Join(argv[2:], "\n") + "\n", true
		case !strings.Contains(format, "%"):
			return ansiC(format), true
		}
	}
	return "", false
}

// hdocText returns a here-document's text: literal when its delimiter is
// quoted, with escapes applied and expansions shown as written otherwise.
func (w *walker) hdocText(r *syntax.Redirect) string {
	if r.Hdoc == nil {
		return ""
	}
	delim := ""
	if r.Word != nil {
		delim = r.Word.Lit()
	}
	quotedDelim := delim == "" || strings.Contains(delim, `\`)
	var b strings.Builder
	for _, p := range r.Hdoc.Parts {
		switch x := p.(type) {
		case *syntax.Lit:
			if quotedDelim {
				b.WriteString(x.Value)
			} else {
				b.WriteString(unescapeHdoc(x.Value))
			}
		case *syntax.ParamExp:
			b.WriteString(w.paramRaw(x))
		default:
			b.WriteString(w.raw(p))
		}
	}
	return b.String()
}

// unescape removes the backslashes of an unquoted literal: \r\m is rm.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unescapeDQ removes the backslashes that escape inside double quotes.
func unescapeDQ(s string) string {
	return unescapeSome(s, "$`\"\\\n")
}

// unescapeHdoc removes the backslashes that escape in an unquoted
// here-document.
func unescapeHdoc(s string) string {
	return unescapeSome(s, "$`\\\n")
}

func unescapeSome(s, special string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && strings.IndexByte(special, s[i+1]) >= 0 {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ansiC decodes the escapes of $'...' (and of echo -e and printf):
// $'\x72\x6d' is rm.
func ansiC(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; e {
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'e', 'E':
			b.WriteByte(0x1b)
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			j := i + 1
			for j < len(s) && j-i-1 < n && isHex(s[j]) {
				j++
			}
			if j == i+1 {
				b.WriteByte('\\')
				b.WriteByte(e)
				continue
			}
			v, _ := strconv.ParseUint(s[i+1:j], 16, 32) // only hex digits: cannot fail
			if e == 'x' {
				b.WriteByte(byte(v))
			} else if v <= utf8.MaxRune {
				b.WriteRune(rune(v))
			}
			i = j - 1
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(s) && j-i < 3 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			v, _ := strconv.ParseUint(s[i:j], 8, 16) // only octal digits: cannot fail
			b.WriteByte(byte(v))
			i = j - 1
		default:
			b.WriteByte(e)
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// hasGlob reports whether an unquoted literal holds glob characters that
// are not escaped.
func hasGlob(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '*', '?':
			return true
		case '[':
			if strings.IndexByte(s[i+1:], ']') >= 0 {
				return true
			}
		}
	}
	return false
}

// braces expands a word holding a brace expansion ({rm,-rf,/} is three
// fields) when it can be done within maxFields.
func (w *walker) braces(word *syntax.Word) ([]field, bool) {
	hasBrace := false
	for _, p := range word.Parts {
		if l, ok := p.(*syntax.Lit); ok && strings.Contains(l.Value, "{") {
			hasBrace = true
			break
		}
	}
	if !hasBrace {
		return nil, false
	}
	cp := &syntax.Word{Parts: slices.Clone(word.Parts)}
	if !syntax.SplitBraces(cp) {
		return nil, false
	}
	vals, ok := w.braceParts(cp.Parts)
	if !ok {
		return nil, false
	}
	out := make([]field, 0, len(vals))
	for _, v := range vals {
		out = append(out, field{s: v.s, static: v.static, glob: v.glob})
	}
	return out, true
}

type braceVal struct {
	s      string
	static bool
	glob   bool
}

func (w *walker) braceParts(parts []syntax.WordPart) ([]braceVal, bool) {
	acc := []braceVal{{static: true}}
	for _, p := range parts {
		var opts []braceVal
		switch x := p.(type) {
		case *syntax.Lit:
			opts = []braceVal{{s: unescape(x.Value), static: true, glob: hasGlob(x.Value)}}
		case *syntax.BraceExp:
			var ok bool
			if opts, ok = w.braceElems(x); !ok {
				return nil, false
			}
		default:
			var b strings.Builder
			if literalParts(&b, []syntax.WordPart{p}, false) {
				opts = []braceVal{{s: b.String(), static: true}}
			} else {
				opts = []braceVal{{s: w.raw(p)}}
			}
		}
		if len(acc)*len(opts) > maxFields {
			return nil, false
		}
		next := make([]braceVal, 0, len(acc)*len(opts))
		for _, a := range acc {
			for _, o := range opts {
				next = append(next, braceVal{s: a.s + o.s, static: a.static && o.static, glob: a.glob || o.glob})
			}
		}
		acc = next
	}
	return acc, true
}

func (w *walker) braceElems(x *syntax.BraceExp) ([]braceVal, bool) {
	if x.Sequence {
		if len(x.Elems) < 2 {
			return nil, false
		}
		from, to := x.Elems[0].Lit(), x.Elems[1].Lit()
		a, err1 := strconv.Atoi(from)
		b, err2 := strconv.Atoi(to)
		if err1 == nil && err2 == nil {
			if b-a > maxFields || a-b > maxFields {
				return nil, false
			}
			var out []braceVal
			for i := a; ; {
				out = append(out, braceVal{s: strconv.Itoa(i), static: true})
				if i == b {
					break
				}
				if a < b {
					i++
				} else {
					i--
				}
			}
			return out, true
		}
		if len(from) == 1 && len(to) == 1 {
			var out []braceVal
			lo, hi := min(from[0], to[0]), max(from[0], to[0])
			for c := lo; c <= hi && c >= lo; c++ {
				out = append(out, braceVal{s: string(c), static: true})
				if c == 255 {
					break
				}
			}
			return out, len(out) <= maxFields
		}
		return nil, false
	}
	var out []braceVal
	for _, e := range x.Elems {
		vals, ok := w.braceParts(e.Parts)
		if !ok || len(out)+len(vals) > maxFields {
			return nil, false
		}
		out = append(out, vals...)
	}
	return out, true
}
