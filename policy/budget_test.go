package policy_test

import (
	"strings"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/policy"
)

const budgetTools = "version: 1\ntools:\n  send_email: {endpoint: CREATE}\n  pay: {endpoint: CREATE, aliases: [payment]}\n"

func TestBudgetErrors(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string
	}{
		{"no name", "budgets:\n  - {tools: [send_email], limit: 1, window: hour}\n", []string{`b.yaml:6: budgets[0].name: missing (want a unique name`}},
		{"duplicate across elements", "budgets:\n  - {name: b, tools: [send_email], limit: 1, window: hour}\nelements:\n  - name: P\n    type: persona\n    budgets:\n      - {name: b, tools: [pay], limit: 1, window: day}\n",
			[]string{`b.yaml:11: budget "b": duplicate name (first as budgets[0] at line 6)`}},
		{"no tools", "budgets:\n  - {name: b, limit: 1, window: hour}\n", []string{`budget "b": tools: missing`}},
		{"no limit", "budgets:\n  - {name: b, tools: [send_email], window: hour}\n", []string{`budget "b": limit: missing or 0`}},
		{"limit a string", "budgets:\n  - {name: b, tools: [send_email], limit: \"20\", window: hour}\n", []string{`budget "b": limit: got string "20", want a number`}},
		{"negative limit", "budgets:\n  - {name: b, tools: [send_email], limit: -3, window: hour}\n", []string{`budget "b": limit: "-3": -3 is negative`}},
		{"limit too fine", "budgets:\n  - {name: b, tools: [send_email], limit: 0.0000001, window: hour}\n", []string{`more than 6 decimal places`}},
		{"no window", "budgets:\n  - {name: b, tools: [send_email], limit: 1}\n", []string{`budget "b": window: missing (want minute, hour, day, week`}},
		{"bad window", "budgets:\n  - {name: b, tools: [send_email], limit: 1, window: fortnight}\n", []string{`budget "b": window: invalid window "fortnight"`}},
		{"window under a second", "budgets:\n  - {name: b, tools: [send_email], limit: 1, window: 10ms}\n", []string{`shorter than a second`}},
		{"unknown by", "budgets:\n  - {name: b, tools: [send_email], limit: 1, window: hour, by: user}\n", []string{`budget "b": by: unknown key "user" (want agent, session or tool)`}},
		{"both costs", "budgets:\n  - {name: b, tools: [pay], limit: 1, window: hour, cost: {arg: amount, fixed: 2}}\n", []string{`budget "b": cost: has both arg and fixed`}},
		{"empty cost arg", "budgets:\n  - {name: b, tools: [pay], limit: 1, window: hour, cost: {arg: \"\"}}\n", []string{`cost.arg: empty (want the name of the argument that holds the cost)`}},
		{"unknown cost key", "budgets:\n  - {name: b, tools: [pay], limit: 1, window: hour, cost: {argument: amount}}\n", []string{`budget "b": cost: unknown key "argument"`}},
		{"unknown over", "budgets:\n  - {name: b, tools: [pay], limit: 1, window: hour, over: warn}\n", []string{`budget "b": over: unknown action "warn" (want confirm or deny)`}},
		{"unknown key", "budgets:\n  - {name: b, tools: [pay], limit: 1, window: hour, per: agent}\n", []string{`unknown key "per"`}},
		{"not a list", "budgets: {name: b}\n", []string{`budgets: got a mapping, want a list of budgets`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := policy.Parse("b.yaml", []byte(budgetTools+tc.src))
			if err == nil {
				t.Fatalf("Parse(%s) = nil error; want %q", tc.name, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Parse(%s) error:\n%v\nwant it to contain %q", tc.name, err, w)
				}
			}
		})
	}
}

func TestBudgetDefaultsAndLint(t *testing.T) {
	src := budgetTools + `budgets:
  - {name: mail, tools: [send_email, send_sms], limit: 20, window: hour}
  - {name: pay, tools: [payment], cost: {fixed: 5}, limit: 3, window: 15m, by: [agent, tool], over: confirm}
elements:
  - name: Intern
    type: persona
    budgets:
      - {name: intern-pay, tools: [pay], cost: {arg: amount}, limit: 12.5, window: day, by: session}
`
	p, warns, err := policy.Parse("b.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var ws []string
	for _, w := range warns {
		ws = append(ws, w.String())
	}
	all := strings.Join(ws, "\n")
	for _, want := range []string{
		`budget "mail": tools[1]: "send_sms" matches no tool in tools`,
		`budget "pay": tools[0]: "payment" is an alias of "pay"`,
		`budget "pay": cost.fixed: 5 is more than the limit 3: no call ever fits`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings:\n%s\nwant one containing %q", all, want)
		}
	}
	bs := p.AllBudgets()
	if len(bs) != 3 {
		t.Fatalf("AllBudgets = %d; want 3", len(bs))
	}
	if got := bs[0].Describe() + ", over " + string(bs[0].Over); got != "20 calls per hour per agent, over deny" {
		t.Errorf("mail = %q", got)
	}
	if got := bs[1].Describe(); got != "3 at 5 a call per 15m0s per agent per tool" {
		t.Errorf("pay = %q", got)
	}
	if got := bs[2].Describe() + " / " + bs[2].Element; got != "12.5 of amount per day per session / Intern" {
		t.Errorf("intern-pay = %q", got)
	}
}

func TestDiffBudgets(t *testing.T) {
	before := mustParse(t, "old.yaml", budgetTools+`budgets:
  - {name: mail, tools: [send_email], limit: 20, window: hour}
  - {name: gone, tools: [pay], limit: 1, window: day}
`)
	after := mustParse(t, "new.yaml", budgetTools+`budgets:
  - {name: mail, tools: [send_email, pay], limit: 10, window: day, by: session, over: confirm}
  - {name: spend, tools: [pay], cost: {arg: amount}, limit: 500, window: day}
`)
	var got []string
	for _, c := range policy.Diff(before, after) {
		if c.Section == policy.SectionBudget {
			got = append(got, c.String())
		}
	}
	want := []string{
		`budget "gone" removed: [pay]: 1 calls per day per agent, over deny`,
		`budget "mail": tools: added pay`,
		`budget "mail": limit 20 → 10`,
		`budget "mail": window hour → day`,
		`budget "mail": by [agent] → [session]`,
		`budget "mail": over deny → confirm`,
		`budget "spend" added: [pay]: 500 of amount per day per agent, over deny`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Diff budgets:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestParseAmount(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want portcullis.Amount
		err  string
	}{
		{float64(12.5), 12_500_000, ""},
		{int64(3), 3_000_000, ""},
		{"3", 0, `got the string "3"`},
		{float64(-1), 0, "negative"},
		{nil, 0, "got null"},
	} {
		got, err := portcullis.ParseAmount(tc.in)
		if tc.err == "" && (err != nil || got != tc.want) || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("ParseAmount(%v) = %v, %v; want %v, %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}
