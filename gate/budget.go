package gate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/portcullis/portcullis"
)

// cbudget is a compiled budget: its tool patterns (matched without regard
// to case, since a budget only ever makes a call stricter) and the element
// that carries it (-1: the policy's own).
type cbudget struct {
	b     *portcullis.Budget
	elem  int
	exact map[string]bool // lower-cased names
	globs []glob          // lower-cased patterns
	by    [3]bool         // agent, session, tool
	desc  string          // what it allows, for reasons
}

func compileBudgets(c *compiled) error {
	for _, b := range c.pol.AllBudgets() {
		cb := cbudget{b: b, elem: -1, exact: map[string]bool{}, desc: b.Describe()}
		if b.Name == "" {
			return fmt.Errorf("budget with no name")
		}
		if b.Window <= 0 {
			return fmt.Errorf("budget %q: no window", b.Name)
		}
		if b.Limit < 0 || b.Cost.Fixed < 0 {
			return fmt.Errorf("budget %q: negative limit or cost", b.Name)
		}
		if b.Over != portcullis.BudgetDeny && b.Over != portcullis.BudgetConfirm {
			return fmt.Errorf("budget %q: unknown over %q", b.Name, b.Over)
		}
		if b.Element != "" {
			i, ok := c.elemIndex[b.Element]
			if !ok {
				return fmt.Errorf("budget %q: no element %q", b.Name, b.Element)
			}
			cb.elem = i
		}
		if len(b.Tools) == 0 {
			return fmt.Errorf("budget %q: no tools", b.Name)
		}
		for _, t := range b.Tools {
			if r := c.routes[t]; r != nil {
				t = r.name // an alias counts as its tool
			}
			t = strings.ToLower(t)
			if isGlob(t) {
				cb.globs = append(cb.globs, compileGlob(t))
			} else {
				cb.exact[t] = true
			}
		}
		by := b.By
		if len(by) == 0 {
			by = []portcullis.BudgetKey{portcullis.BudgetByAgent}
		}
		for _, k := range by {
			switch k {
			case portcullis.BudgetByAgent:
				cb.by[0] = true
			case portcullis.BudgetBySession:
				cb.by[0], cb.by[1] = true, true // a session is counted within its agent
			case portcullis.BudgetByTool:
				cb.by[2] = true
			default:
				return fmt.Errorf("budget %q: unknown by %q", b.Name, k)
			}
		}
		c.budgets = append(c.budgets, cb)
	}
	return nil
}

func (b *cbudget) matches(lower string) bool {
	if b.exact[lower] {
		return true
	}
	for i := range b.globs {
		if b.globs[i].match(lower) {
			return true
		}
	}
	return false
}

// budgetStage counts the call against the budgets that apply to it: those
// whose tools match the canonical name, carried by the policy or by an
// active element. It runs after the validator and before confirmation, on
// a call not already denied, and only when the policy has budgets: a
// policy without them never reaches the store here.
//
// The call's charges are taken if they all fit (one atomic store step) and
// given back at the end of the decision unless the call was let through
// (run), so only a call finally allowed uses a budget. A call that does not
// fit is denied, or — when the budget's over is confirm — needs a person
// (CONFIRM_SINGLE_USE); once a person lets it through it is counted past
// the limit. Explain and shadow mode only look.
func (e *eval) budgetStage(ctx context.Context) bool {
	var applied []*cbudget
	lower := strings.ToLower(e.canonical)
	for i := range e.pol.budgets {
		b := &e.pol.budgets[i]
		if b.elem >= 0 && (e.active == nil || !e.active[b.elem]) {
			continue
		}
		if b.matches(lower) {
			applied = append(applied, b)
		}
	}
	if len(applied) == 0 {
		return false
	}
	now := e.g.clock.Now()
	charges := make([]portcullis.BudgetCharge, len(applied))
	for i, b := range applied {
		cost, err := e.budgetCost(b)
		if err != nil {
			e.end(&portcullis.TraceEntry{Stage: "budget", Result: "budget " + quote(b.b.Name) + ": " + err.Error(), Facts: factsBudgetCost}, ending{
				outcome: portcullis.OutcomeDeny, level: portcullis.Deny, code: portcullis.CodeBudgetCostInvalid,
				reason:    "Operation " + e.quotedTool() + " is counted by budget " + quote(b.b.Name) + " (" + b.desc + "), which takes its cost from argument " + quote(b.b.Cost.Arg) + ", but " + err.Error() + ". The call is refused: send the cost as a number of 0 or more.",
				authorize: "the same call with argument " + quote(b.b.Cost.Arg) + " set to the cost as a number",
			})
			return true
		}
		start, end := portcullis.WindowOf(now, b.b.Window)
		ch := portcullis.BudgetCharge{Budget: b.b.Name, Start: start, End: end, Limit: b.b.Limit, Cost: cost}
		if b.by[0] {
			ch.Agent = e.c.Agent
		}
		if b.by[1] {
			ch.Session = e.c.Session
		}
		if b.by[2] {
			ch.Tool = e.canonical
		}
		charges[i] = ch
	}
	st := e.g.budgets
	if st == nil {
		parts := make([]string, len(charges))
		for i, c := range charges {
			parts[i] = fmt.Sprintf("%s (%s) would take %s", quote(c.Budget), applied[i].desc, c.Cost)
		}
		e.trace("budget", strings.Join(parts, "; ")+"; this gate keeps no state, so no use is read or counted")
		return false
	}
	mode := portcullis.BudgetTakeIfFits
	if e.dry {
		mode = portcullis.BudgetPeek
	}
	res, err := st.TakeBudget(ctx, charges, mode, now)
	if err != nil {
		e.failClosed("budget", fmt.Errorf("count budgets: %w", err))
		return true
	}
	if res.Over < 0 {
		if res.Taken {
			e.budgetTaken = charges
		}
		verb := "took"
		if !res.Taken {
			verb = "would take"
		}
		parts := make([]string, len(charges))
		for i, c := range charges {
			parts[i] = fmt.Sprintf("%s: %s %s of %s (%s), %s used before", quote(c.Budget), verb, c.Cost, c.Limit, applied[i].desc, res.Used[i])
		}
		e.traceFact("budget", strings.Join(parts, "; "), factsBudgetTaken)
		return false
	}
	b, c := applied[res.Over], charges[res.Over]
	used := res.Used[res.Over]
	e.d.Budget = &portcullis.BudgetStatus{Name: c.Budget, Allows: b.desc, Used: used, Limit: c.Limit, Cost: c.Cost, ReopensAt: c.End}
	over := fmt.Sprintf("Budget %s allows %s; %s is used in this window and this call costs %s. The window reopens at %s (in %s).",
		quote(c.Budget), b.desc, used, c.Cost, c.End.Format(time.RFC3339), c.End.Sub(now).Round(time.Second))
	if b.b.Over == portcullis.BudgetDeny {
		e.end(&portcullis.TraceEntry{Stage: "budget", Result: "over budget " + quote(c.Budget) + ": " + used.String() + " used of " + c.Limit.String() + ", cost " + c.Cost.String() + "; over: deny", Facts: factsBudgetOver}, ending{
			outcome: portcullis.OutcomeDeny, level: portcullis.Deny, code: portcullis.CodeBudgetExceeded,
			reason:    "Operation " + e.quotedTool() + " is over its budget. " + over + " Try again after it reopens.",
			authorize: "the same call after " + c.End.Format(time.RFC3339) + ", or a person raising budget " + quote(c.Budget) + " in the policy",
		})
		return true
	}
	e.level = e.level.Stricter(portcullis.ConfirmSingleUse)
	e.overBudget, e.overCharges, e.overReason = true, charges, over
	e.traceFact("budget", "over budget "+quote(c.Budget)+": "+used.String()+" used of "+c.Limit.String()+", cost "+c.Cost.String()+"; over: confirm, so a person must let it through (CONFIRM_SINGLE_USE)", factsBudgetOver)
	return false
}

var (
	factsBudgetTaken = []portcullis.Fact{portcullis.FactBudgetTaken}
	factsBudgetOver  = []portcullis.Fact{portcullis.FactBudgetOver}
	factsBudgetCost  = []portcullis.Fact{portcullis.FactBudgetCostInvalid}
)

// budgetCost is what the call costs budget b: its fixed cost, the number
// in its cost argument, or 1 for a rate.
func (e *eval) budgetCost(b *cbudget) (portcullis.Amount, error) {
	switch {
	case b.b.Cost.Arg != "":
		v, ok := e.c.Args[b.b.Cost.Arg]
		if !ok {
			return 0, fmt.Errorf("the call has no argument %s", quote(b.b.Cost.Arg))
		}
		a, err := portcullis.ParseAmount(v)
		if err != nil {
			return 0, fmt.Errorf("its argument %s is not a cost: %v", quote(b.b.Cost.Arg), err)
		}
		return a, nil
	case b.b.Cost.Fixed != 0:
		return b.b.Cost.Fixed, nil
	}
	return portcullis.Units(1), nil
}

// forceBudget counts a call a person let through past its budget.
func (e *eval) forceBudget(ctx context.Context) bool {
	if e.dry || e.g.budgets == nil {
		return true
	}
	if _, err := e.g.budgets.TakeBudget(ctx, e.overCharges, portcullis.BudgetTakeForce, e.g.clock.Now()); err != nil {
		e.failClosed("budget", fmt.Errorf("count the confirmed call against its budget: %w", err))
		return false
	}
	e.budgetTaken = slices.Clone(e.overCharges)
	return true
}

// returnBudget gives back what the call took from its budgets when it was
// not let through in the end (it needs a person, a later stage denied it,
// or its audit row could not be written). A failure to give back is
// logged: the budget then counts a call that did not happen, which errs
// on the safe side.
func (e *eval) returnBudget(ctx context.Context) {
	if e.budgetTaken == nil || e.d.Outcome == portcullis.OutcomeAllow {
		return
	}
	charges := e.budgetTaken
	e.budgetTaken = nil
	if err := e.g.budgets.ReturnBudget(context.WithoutCancel(ctx), charges); err != nil {
		e.g.log.Warn("could not give back budget use of a call not let through", "decision", e.d.DecisionID, "err", err)
	}
}
