package portcullis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/memstore"
)

// BenchmarkVerifyAudit verifies a log of 10,000 decision rows: the chain's
// hashes and every row's copied columns against its body.
func BenchmarkVerifyAudit(b *testing.B) {
	ctx := context.Background()
	st := memstore.New(nil)
	const rows = 10000
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for i := range rows {
		ev := portcullis.AuditEvent{
			Kind: portcullis.AuditDecision, Time: at.Add(time.Duration(i) * time.Millisecond), DecisionID: fmt.Sprintf("d%d", i),
			Session: "s1", Agent: "bot", Tool: "write_note", Outcome: portcullis.OutcomeAllow,
			Request:  &portcullis.Call{Tool: "write_note", Session: "s1", Args: map[string]any{"id": i, "text": "some note text"}},
			Decision: &portcullis.Decision{DecisionID: fmt.Sprintf("d%d", i), Outcome: portcullis.OutcomeAllow, PermissionLevel: portcullis.AutoApprove, Reason: "allowed by the policy"},
		}
		if _, err := st.AppendAudit(ctx, ev); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		v, err := portcullis.VerifyAudit(ctx, st, nil)
		if err != nil || !v.OK() || v.Rows != rows {
			b.Fatalf("VerifyAudit = %+v, %v", v, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rows, "ns/row")
}
