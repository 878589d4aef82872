package sqlite_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/sqlite"
	"github.com/portcullis/portcullis/storetest"
)

// Two gates, each with its own store on one SQLite file (as two processes
// sharing a state directory), decide sends of one agent at once: the rate
// holds exactly, and only calls let through are counted.
func TestBudgetExactAcrossStores(t *testing.T) {
	ctx := context.Background()
	pol, _, err := policy.Parse("budget.yaml", []byte(`
version: 1
tools:
  send_email: {endpoint: CREATE, defaultLevel: AUTO_APPROVE}
budgets:
  - {name: email-rate, tools: [send_email], limit: 20, window: hour, by: agent}
`))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "state.db")
	var gates []*gate.Gate
	for range 2 {
		st, err := sqlite.Open(ctx, path, sqlite.Options{Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := st.Close(); err != nil {
				t.Error(err)
			}
		})
		g, err := gate.New(pol, gate.WithStore(st), gate.WithClock(clock))
		if err != nil {
			t.Fatal(err)
		}
		gates = append(gates, g)
	}
	const callers = 50
	var allowed atomic.Int32
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := gates[i%2].Decide(ctx, portcullis.Call{Tool: "send_email", Agent: "mailer", Args: map[string]any{"n": i}})
			if err != nil {
				t.Error(err)
				return
			}
			if d.Allowed() {
				allowed.Add(1)
			} else if d.Code != portcullis.CodeBudgetExceeded {
				t.Errorf("Decide(send %d) = %s %s: %s; want allow or BUDGET_EXCEEDED", i, d.Outcome, d.Code, d.Reason)
			}
		}()
	}
	wg.Wait()
	if got := allowed.Load(); got != 20 {
		t.Errorf("%d sends over two stores on one file, rate 20 an hour: %d allowed; want exactly 20", callers, got)
	}
}
