package budgets_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/budgets"
	"github.com/portcullis/portcullis/memstore"
)

func TestUseAndWrite(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	st := memstore.New(nil)
	end := now.Add(12 * time.Hour)
	charges := []portcullis.BudgetCharge{
		{Budget: "email-rate", Agent: "mailer", Start: now.Add(-12 * time.Hour), End: end, Limit: portcullis.Units(2), Cost: portcullis.Units(2)},
		{Budget: "spend", Session: "s1", Start: now.Add(-time.Hour), End: now.Add(time.Hour), Limit: portcullis.Units(5), Cost: portcullis.Units(7)},
	}
	for _, c := range charges {
		if _, err := st.TakeBudget(ctx, []portcullis.BudgetCharge{c}, portcullis.BudgetTakeForce, now); err != nil {
			t.Fatal(err)
		}
	}

	var out strings.Builder
	if err := budgets.Write(&out, nil, now, false); err != nil || out.String() != "No budget has been used in its current window.\n" {
		t.Errorf("Write(none) = %q, %v", out.String(), err)
	}
	use, err := budgets.Use(ctx, st, now, nil)
	if err != nil || len(use) != 2 {
		t.Fatalf("Use = %+v, %v; want both counters", use, err)
	}
	out.Reset()
	if err := budgets.Write(&out, use, now, false); err != nil {
		t.Fatal(err)
	}
	want := "BUDGET      AGENT   SESSION  TOOL  USED  LIMIT  LEFT  REOPENS\n" +
		"email-rate  mailer  -        -     2     2      0     2026-03-02T00:00:00Z (in 12h0m0s)\n" +
		"spend       -       s1       -     7     5      0     2026-03-01T13:00:00Z (in 1h0m0s)\n"
	if out.String() != want {
		t.Errorf("Write =\n%s\nwant\n%s", out.String(), want)
	}

	use, err = budgets.Use(ctx, st, now, []string{"spend"})
	if err != nil || len(use) != 1 || use[0].Budget != "spend" {
		t.Fatalf("Use(spend) = %+v, %v; want its counter alone", use, err)
	}
	out.Reset()
	if err := budgets.Write(&out, use, now, true); err != nil {
		t.Fatal(err)
	}
	var u portcullis.BudgetUsage
	if err := json.Unmarshal([]byte(out.String()), &u); err != nil || u.Session != "s1" || u.Used != portcullis.Units(7) || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("Write(JSON) = %q, %v", out.String(), err)
	}
	if use, err := budgets.Use(ctx, st, now, []string{"none"}); err != nil || len(use) != 0 {
		t.Errorf("Use(none) = %+v, %v; want no counter", use, err)
	}
}
