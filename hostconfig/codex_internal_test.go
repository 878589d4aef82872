package hostconfig

import "testing"

// TestCodexHookHash pins the fingerprint to the one Codex 0.169 itself
// reports for the same hooks (the app server's hooks/list currentHash):
// a trust entry with any other value leaves the hook untrusted, and
// Codex then skips it without a word.
func TestCodexHookHash(t *testing.T) {
	star := "*"
	for _, tc := range []struct {
		event   string
		matcher *string
		command string
		timeout int
		want    string
	}{
		{"pre_tool_use", nil, "/usr/local/bin/portcullis hook codex --policy /p/policy.yaml", 60,
			"sha256:4a9ad0bd44f45fcbf782d3b6067d3a18277a9e62839a357e50e3c56d347e2845"},
		{"permission_request", nil, "/usr/local/bin/portcullis hook codex --policy /p/policy.yaml", 60,
			"sha256:407c5f0627f5063fb55afe6c6406c95922bc99637c160f3b2019492672eee92a"},
		{"pre_tool_use", &star, "'/opt/port cullis/portcullis' hook codex --policy /etc/portcullis/policy.yaml --hold", 120,
			"sha256:858fe4c2960da7d06fdef8462922fb2d19e7ec9c532fcc39d3e014e7b62490ed"},
	} {
		got, err := codexHookHash(tc.event, tc.matcher, tc.command, tc.timeout)
		if err != nil || got != tc.want {
			t.Errorf("%s %q: %s, %v; want %s", tc.event, tc.command, got, err, tc.want)
		}
	}
}
