package gate

// WildcardMatch exposes the glob matcher to the external tests.
func WildcardMatch(pattern, name string) bool {
	g := compileGlob(pattern)
	if g.match(name) != wildcardMatch(pattern, name) {
		panic("simple and general glob matchers disagree on " + pattern + " " + name)
	}
	return g.match(name)
}
