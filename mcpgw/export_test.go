package mcpgw

import "time"

// SetProgressEvery shortens how often a held call reports progress, for
// tests; it returns a func that restores it.
func SetProgressEvery(d time.Duration) func() {
	old := progressEvery
	progressEvery = d
	return func() { progressEvery = old }
}
