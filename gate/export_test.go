package gate

// WildcardMatch exposes the glob matcher to the external tests.
func WildcardMatch(pattern, name string) bool {
	g := compileGlob(pattern)
	if g.match(name) != wildcardMatch(pattern, name) {
		panic("simple and general glob matchers disagree on " + pattern + " " + name)
	}
	return g.match(name)
}

// PipelineStages names the stages of the pipeline table in the order
// Decide runs them, as they appear in the trace.
func PipelineStages() []string {
	names := make([]string, len(pipeline))
	for i, s := range pipeline {
		names[i] = s.name
	}
	return names
}
