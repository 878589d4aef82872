package policy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/policy"
)

func TestAuditSettings(t *testing.T) {
	src := `version: 1
tools:
  login: {endpoint: EXECUTE, redact: [password, otp]}
audit:
  redact: [apiKey]
  retention: {maxAge: 2160h, maxRows: 5000000}
`
	p, _, err := policy.Parse("audit.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := portcullis.AuditConfig{Redact: []string{"apiKey"}, Retention: portcullis.AuditRetention{MaxAge: 2160 * time.Hour, MaxRows: 5000000}}
	if diff := cmp.Diff(want, p.Audit); diff != "" {
		t.Errorf("Parse(audit) audit (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"password", "otp"}, p.Tools[0].Redact); diff != "" {
		t.Errorf("Parse(audit) tool redact (-want +got):\n%s", diff)
	}
}

func TestAuditSettingsErrors(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"maxRows zero", "version: 1\naudit: {retention: {maxRows: 0}}\n", "bad.yaml:2: audit.retention.maxRows: 0 is not more than 0"},
		{"maxAge not a duration", "version: 1\naudit: {retention: {maxAge: 90 days}}\n", `bad.yaml:2: audit.retention.maxAge: invalid duration "90 days"`},
		{"unknown retention key", "version: 1\naudit:\n  retention: {maxAgee: 1h}\n", `unknown key "maxAgee" (did you mean "maxAge"?)`},
		{"empty redact name", "version: 1\naudit: {redact: [\"\"]}\n", "audit.redact: an empty argument name"},
		{"redact not a list", "version: 1\ntools:\n  x: {endpoint: READ, redact: password}\n", `bad.yaml:3: tool "x": redact`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := policy.Parse("bad.yaml", []byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse(%s) = %v; want an error containing %q", tc.name, err, tc.want)
			}
		})
	}
}
