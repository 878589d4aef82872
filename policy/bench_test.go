package policy_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/portcullis/portcullis/policy"
)

// BenchmarkParse parses a generated policy of 100,000 tools (every fourth
// with an alias) and 100 elements whose lists hold exact names and globs.
func BenchmarkParse(b *testing.B) {
	data := []byte(bigPolicy(100_000, 100))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := policy.Parse("big.yaml", data); err != nil {
			b.Fatal(err)
		}
	}
}

func bigPolicy(tools, elements int) string {
	endpoints := []string{"READ", "CREATE", "UPDATE", "DELETE", "EXECUTE"}
	var s strings.Builder
	s.WriteString("version: 1\ntools:\n")
	for i := range tools {
		fmt.Fprintf(&s, "  op_%d_%s: {endpoint: %s", i, strings.ToLower(endpoints[i%5]), endpoints[i%5])
		if i%4 == 0 {
			fmt.Fprintf(&s, ", aliases: [alias_%d]", i)
		}
		s.WriteString("}\n")
	}
	s.WriteString("elements:\n")
	for i := range elements {
		fmt.Fprintf(&s, "  - name: element %d\n    type: skill\n    gatekeeper:\n", i)
		fmt.Fprintf(&s, "      allow: [op_%d_read, \"*_read\"]\n", i*5)
		fmt.Fprintf(&s, "      confirm: [op_%d_create, alias_%d]\n", i*5+1, i*4)
		fmt.Fprintf(&s, "      deny: [\"op_%d*_delete\"]\n", i)
	}
	return s.String()
}

// BenchmarkParseAdversarial parses inputs shaped to make a careless parser
// quadratic: a mapping with 100,000 unknown keys before a list of 100,000
// empty patterns (each reported with its line), and globs that backtrack
// against long tool names.
func BenchmarkParseAdversarial(b *testing.B) {
	var keys, globs strings.Builder
	keys.WriteString("version: 1\nelements:\n  - name: E\n    type: persona\n    gatekeeper:\n")
	for i := range 100_000 {
		fmt.Fprintf(&keys, "      k%d: 1\n", i)
	}
	keys.WriteString("      allow: [" + strings.Repeat(`"", `, 100_000) + "x]\n")

	globs.WriteString("version: 1\ntools:\n")
	long := strings.Repeat("a", 490)
	for i := range 10_000 {
		fmt.Fprintf(&globs, "  %s%d: {endpoint: READ}\n", long, i)
	}
	globs.WriteString("elements:\n  - name: E\n    type: persona\n    gatekeeper:\n      deny: [")
	for i := range 400 {
		fmt.Fprintf(&globs, "\"%s%db\", ", strings.Repeat("*a", 200), i)
	}
	globs.WriteString("x]\n")

	for _, in := range []struct {
		name string
		data []byte
	}{{"unknownKeys", []byte(keys.String())}, {"backtrackingGlobs", []byte(globs.String())}} {
		b.Run(in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.data)))
			for b.Loop() {
				// Both inputs are meant to give problems; only the time counts.
				if _, _, err := policy.Parse("adversarial.yaml", in.data); err == nil && in.name == "unknownKeys" {
					b.Fatal("Parse(unknownKeys) = nil error; want errors")
				}
			}
		})
	}
}
