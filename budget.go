package portcullis

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Budget is one entry of `budgets` (or of an element's `budgets`): a cap on
// how often the tools it names may be called, or on how much they may
// spend, in a fixed window, counted per agent, per session or per tool.
type Budget struct {
	// Name is `name`, unique across the policy; it names the budget in
	// decisions, metrics and `portcullis budgets`.
	Name string
	// Tools is `tools`: canonical tool names or globs (`*` any run, `?`
	// one character) the budget counts.
	Tools []string
	// Limit is `limit`: how many calls (a rate) or how much cost (a spend)
	// the window holds.
	Limit Amount
	// Window is `window`: minute, hour, day, week, or a Go duration. Windows
	// are fixed and aligned to UTC (an hour window reopens on the hour, a
	// day window at midnight UTC, a week window on Monday 00:00 UTC).
	Window time.Duration
	// By is `by`: what the budget counts apart, any of agent, session and
	// tool (default agent). A session is counted within its agent.
	By []BudgetKey
	// Cost is `cost`: what one call costs; the zero Cost is 1 per call (a
	// rate).
	Cost BudgetCost
	// Over is `over`: what happens to a call that does not fit (default
	// deny).
	Over BudgetAction
	// Element is the element that carries the budget ("" for the policy's
	// own `budgets`): it counts only while that element is active.
	Element string
	// Line is the line of the entry in the policy file.
	Line int
}

// IsSpend reports whether the budget caps a cost rather than a count.
func (b *Budget) IsSpend() bool { return b.Cost.Arg != "" || b.Cost.Fixed != 0 }

// Describe says what the budget allows: "20 calls per hour per agent",
// "500 of amount per day per agent".
func (b *Budget) Describe() string {
	var s strings.Builder
	switch {
	case b.Cost.Arg != "":
		s.WriteString(b.Limit.String() + " of " + b.Cost.Arg)
	case b.Cost.Fixed != 0:
		s.WriteString(b.Limit.String() + " at " + b.Cost.Fixed.String() + " a call")
	default:
		s.WriteString(b.Limit.String() + " calls")
	}
	s.WriteString(" per " + WindowName(b.Window))
	by := b.By
	if len(by) == 0 {
		by = []BudgetKey{BudgetByAgent}
	}
	for _, k := range by {
		s.WriteString(" per " + string(k))
	}
	return s.String()
}

// WindowName names a budget window: "hour" for an hour, "15m0s" otherwise.
func WindowName(d time.Duration) string {
	for name, w := range budgetWindows {
		if w == d {
			return name
		}
	}
	return d.String()
}

var budgetWindows = map[string]time.Duration{
	"minute": time.Minute,
	"hour":   time.Hour,
	"day":    24 * time.Hour,
	"week":   7 * 24 * time.Hour,
}

// ParseWindow reads a budget window: minute, hour, day, week, or a Go
// duration of at least a second.
func ParseWindow(s string) (time.Duration, error) {
	if d, ok := budgetWindows[s]; ok {
		return d, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid window %q (want minute, hour, day, week or a Go duration such as 15m)", s)
	}
	if d < time.Second {
		return 0, fmt.Errorf("window %q is shorter than a second", s)
	}
	return d, nil
}

// WindowOf returns the fixed window of length d that holds t: it starts at a
// multiple of d since the zero time, so an hour starts on the hour, a day
// at midnight UTC and a week on a Monday.
func WindowOf(t time.Time, d time.Duration) (start, end time.Time) {
	start = t.UTC().Truncate(d)
	return start, start.Add(d)
}

// BudgetKey is what a budget counts apart.
type BudgetKey string

// The budget keys.
const (
	BudgetByAgent   BudgetKey = "agent"
	BudgetBySession BudgetKey = "session"
	BudgetByTool    BudgetKey = "tool"
)

// BudgetCost is a budget's `cost`: the argument that holds a call's cost
// (`arg`), or a fixed cost per call (`fixed`).
type BudgetCost struct {
	Arg   string // `arg`: a top-level argument holding a number of 0 or more
	Fixed Amount // `fixed`: the cost of every call
}

// BudgetAction is what a budget does with a call that does not fit.
type BudgetAction string

// The budget actions.
const (
	// BudgetConfirm: the call needs a person (CONFIRM_SINGLE_USE, code
	// BUDGET_EXCEEDED); once approved it is counted past the limit.
	BudgetConfirm BudgetAction = "confirm"
	// BudgetDeny: the call is denied (BUDGET_EXCEEDED) until the window
	// reopens.
	BudgetDeny BudgetAction = "deny"
)

// Amount is a budget quantity in millionths, so that sums are exact: a
// count of calls, or a cost such as 12.50.
type Amount int64

// AmountScale is how many Amount units make one.
const AmountScale = 1_000_000

// MaxAmount bounds a budget's limit and a call's cost: a trillion.
const MaxAmount Amount = 1_000_000_000_000 * AmountScale

// Units returns n whole units as an Amount.
func Units(n int64) Amount { return Amount(n * AmountScale) }

// String writes the amount as a decimal without trailing zeros: 12.5.
func (a Amount) String() string {
	neg := a < 0
	if neg {
		a = -a
	}
	s := strconv.FormatInt(int64(a/AmountScale), 10)
	if f := int64(a % AmountScale); f != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%06d", f), "0")
	}
	if neg {
		s = "-" + s
	}
	return s
}

// MarshalJSON writes the amount as a JSON number.
func (a Amount) MarshalJSON() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalJSON reads a JSON number.
func (a *Amount) UnmarshalJSON(b []byte) error {
	v, err := ParseAmount(json.Number(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// ParseAmount reads a call's cost: a JSON number (json.Number, a float or
// an integer type) of 0 or more, at most MaxAmount, with at most six
// decimal places. Anything else — a string, a boolean, null, an object,
// NaN, an infinity, a negative number — is an error saying what it got:
// a cost is never taken as 0 because it could not be read.
func ParseAmount(v any) (Amount, error) {
	var r *big.Rat
	switch x := v.(type) {
	case json.Number:
		var ok bool
		if r, ok = new(big.Rat).SetString(string(x)); !ok || !isJSONNumber(string(x)) {
			return 0, fmt.Errorf("%q is not a number", string(x))
		}
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return 0, fmt.Errorf("%v is not a finite number", x)
		}
		r = new(big.Rat)
		r.SetString(strconv.FormatFloat(x, 'f', -1, 64))
	case float32:
		return ParseAmount(float64(x))
	case int:
		r = new(big.Rat).SetInt64(int64(x))
	case int64:
		r = new(big.Rat).SetInt64(x)
	case int32:
		r = new(big.Rat).SetInt64(int64(x))
	case uint64:
		r = new(big.Rat).SetUint64(x)
	case nil:
		return 0, fmt.Errorf("got null, want a number")
	case string:
		return 0, fmt.Errorf("got the string %q, want a number", clipText(x))
	case bool:
		return 0, fmt.Errorf("got %t, want a number", x)
	default:
		return 0, fmt.Errorf("got %s, want a number", jsonKindOf(v))
	}
	if r.Sign() < 0 {
		return 0, fmt.Errorf("%s is negative", strings.TrimRight(strings.TrimRight(r.FloatString(12), "0"), "."))
	}
	r.Mul(r, new(big.Rat).SetInt64(AmountScale))
	if !r.IsInt() {
		return 0, fmt.Errorf("%s has more than 6 decimal places", strings.TrimRight(strings.TrimRight(new(big.Rat).Quo(r, new(big.Rat).SetInt64(AmountScale)).FloatString(12), "0"), "."))
	}
	n := r.Num()
	if !n.IsInt64() || Amount(n.Int64()) > MaxAmount {
		return 0, fmt.Errorf("%s is more than %s", new(big.Rat).Quo(r, new(big.Rat).SetInt64(AmountScale)).FloatString(0), MaxAmount)
	}
	return Amount(n.Int64()), nil
}

// isJSONNumber reports whether s is written as a JSON number (big.Rat also
// reads fractions such as 1/3, and hexadecimal).
func isJSONNumber(s string) bool {
	return json.Valid([]byte(s)) && s != "" && (s[0] == '-' || (s[0] >= '0' && s[0] <= '9'))
}

func clipText(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func jsonKindOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("a %T", v)
}

// BudgetCharge is what one call costs one budget: the budget, the key it
// is counted under (the dimensions the budget's `by` does not name are
// empty), the window, the budget's limit and the call's cost.
type BudgetCharge struct {
	Budget  string    `json:"budget"`
	Agent   string    `json:"agent,omitempty"`
	Session string    `json:"session,omitempty"`
	Tool    string    `json:"tool,omitempty"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Limit   Amount    `json:"limit"`
	Cost    Amount    `json:"cost"`
}

// SameCounter reports whether c and o count in the same row: the same
// budget, key and window.
func (c *BudgetCharge) SameCounter(o *BudgetCharge) bool {
	return c.Budget == o.Budget && c.Agent == o.Agent && c.Session == o.Session && c.Tool == o.Tool && c.Start.Equal(o.Start)
}

// LessCharge orders charges by budget, key and window: the order in which
// stores lock their counters, so two callers never wait on each other in
// a circle.
func LessCharge(a, b *BudgetCharge) bool {
	switch {
	case a.Budget != b.Budget:
		return a.Budget < b.Budget
	case a.Agent != b.Agent:
		return a.Agent < b.Agent
	case a.Session != b.Session:
		return a.Session < b.Session
	case a.Tool != b.Tool:
		return a.Tool < b.Tool
	}
	return a.Start.Before(b.Start)
}

// BudgetMode says what TakeBudget does.
type BudgetMode uint8

// The budget modes.
const (
	// BudgetTakeIfFits records every charge if each fits in its window
	// (use + cost ≤ limit), and none otherwise.
	BudgetTakeIfFits BudgetMode = iota
	// BudgetTakeForce records every charge whether it fits or not: a
	// person approved the call past its budget.
	BudgetTakeForce
	// BudgetPeek records nothing and reports what BudgetTakeIfFits would
	// do (explain, shadow mode).
	BudgetPeek
)

// BudgetResult is what TakeBudget did.
type BudgetResult struct {
	// Taken is set when the charges were recorded.
	Taken bool
	// Over is the index of the first charge that does not fit, -1 when
	// all fit.
	Over int
	// Used is each charge's use in its window before this call.
	Used []Amount
}

// BudgetUsage is one counter's use in its current window.
type BudgetUsage struct {
	Budget  string    `json:"budget"`
	Agent   string    `json:"agent,omitempty"`
	Session string    `json:"session,omitempty"`
	Tool    string    `json:"tool,omitempty"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Used    Amount    `json:"used"`
	Limit   Amount    `json:"limit"`
}

// SortBudgetUsage sorts usage as BudgetUse returns it: by budget, then
// most used first, then by key.
func SortBudgetUsage(u []BudgetUsage) {
	sort.Slice(u, func(i, j int) bool {
		a, b := &u[i], &u[j]
		switch {
		case a.Budget != b.Budget:
			return a.Budget < b.Budget
		case a.Used != b.Used:
			return a.Used > b.Used
		case a.Agent != b.Agent:
			return a.Agent < b.Agent
		case a.Session != b.Session:
			return a.Session < b.Session
		}
		return a.Tool < b.Tool
	})
}

// BudgetStore keeps the use of budgets: one counter per budget, key and
// fixed window.
type BudgetStore interface {
	// TakeBudget checks the charges against their windows' use and, as
	// mode says, records them all or none, in one atomic step: however
	// many callers race (on any replica), a window never holds more than
	// its limit except through BudgetTakeForce. Counters of windows that
	// ended before now may be dropped. INVALID_REQUEST for a negative cost
	// or a charge with no budget or window.
	TakeBudget(ctx context.Context, charges []BudgetCharge, mode BudgetMode, now time.Time) (BudgetResult, error)
	// ReturnBudget gives back charges taken for a call that was not let
	// through in the end (a use never goes below 0).
	ReturnBudget(ctx context.Context, charges []BudgetCharge) error
	// BudgetUse lists the counters whose window holds now, as
	// SortBudgetUsage orders them.
	BudgetUse(ctx context.Context, now time.Time) ([]BudgetUsage, error)
}

// CheckCharges checks what TakeBudget and ReturnBudget are given. Every
// Store uses it, so they agree.
func CheckCharges(charges []BudgetCharge) error {
	for i := range charges {
		c := &charges[i]
		switch {
		case c.Budget == "":
			return invalid("budget charge %d names no budget", i)
		case c.Cost < 0:
			return invalid("budget %q: negative cost %s", c.Budget, c.Cost)
		case !c.End.After(c.Start):
			return invalid("budget %q: window ends before it starts", c.Budget)
		}
	}
	return nil
}

// BudgetStatus is, in a decision, the budget that a call did not fit:
// what it allows, what was used, what the call costs and when its window
// reopens.
type BudgetStatus struct {
	Name      string    `json:"name"`
	Allows    string    `json:"allows"`
	Used      Amount    `json:"used"`
	Limit     Amount    `json:"limit"`
	Cost      Amount    `json:"cost"`
	ReopensAt time.Time `json:"reopensAt"`
}
