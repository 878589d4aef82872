package policy

// Match exposes the lint's pattern matcher to the tests.
func Match(pattern, name string) bool {
	m, _ := match(pattern, name, -1)
	return m
}
