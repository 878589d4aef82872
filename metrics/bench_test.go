package metrics_test

import (
	"context"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/metrics"
	"github.com/portcullis/portcullis/policy"
)

// BenchmarkDecideWithMetrics is a deterministic allow (no store) with the
// Prometheus observer: what metrics add to a decision.
func BenchmarkDecideWithMetrics(b *testing.B) {
	pol, _, err := policy.Parse("policy.yaml", []byte(testPolicy))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		opts []gate.Option
	}{
		{"none", nil},
		{"metrics", []gate.Option{gate.WithObserver(metrics.New(metrics.Options{}))}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			g, err := gate.New(pol, bc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			call := portcullis.Call{Tool: "list_elements", Session: "s1", Agent: "a"}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := g.Decide(ctx, call); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
