package autonomy

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/portcullis/portcullis"
)

// Input is what the evaluator knows about an autonomous run when its agent
// is about to take the next step.
type Input struct {
	// Agent names the agent, for the reasons people read.
	Agent string
	// Envelope is the agent's autonomy envelope; nil means the reference
	// defaults (see Defaults). In an envelope, an empty RiskTolerance means
	// moderate (the policy file's default) and MaxAutonomousSteps 0 means
	// unlimited.
	Envelope *portcullis.Autonomy
	// Step is how many steps the run has taken so far (0 before the first).
	Step int
	// PreviousOutcome is the outcome of the previous step; "" when there is
	// none yet.
	PreviousOutcome portcullis.StepOutcome
	// RiskScore is the next action's risk score, 0 to 100; nil when it was
	// not scored. It is sanitized before use (see SanitizeRiskScore).
	RiskScore *float64
	// NextActionHint describes the action about to be taken, such as the
	// call's summary. The approval patterns and the danger patterns are
	// matched against it.
	NextActionHint string
	// Blocked says the shell classifier classified the action blocked. It
	// puts the action in the danger zone.
	Blocked bool
	// NoFactors leaves the directive's Factors empty, so a directive that
	// continues allocates nothing: for callers that need only the verdict
	// and the reason on a hot path (the gate, once per step of every run).
	NoFactors bool
}

// Directive is the evaluator's answer: continue, pause for a person, or
// stop. It has the shape of the reference's AutonomyDirective.
type Directive struct {
	// Continue is true when the agent may take the next step without a person.
	Continue bool `json:"continue"`
	// Stopped is a hard stop: the action is in the danger zone, and the gate
	// must block the agent until a person clears the block. It is a distinct
	// signal from a pause so that it cannot be downgraded to one.
	Stopped bool `json:"stopped"`
	// Reason says, in a sentence a person understands, why the run pauses or
	// stops, naming the number or pattern involved; "" when it continues.
	Reason string `json:"reason"`
	// Factors are what each check found, in the order they ran. Never nil.
	Factors []string `json:"factors"`
	// StepsRemaining is how many more steps the step budget allows after
	// this one (0 when it is used up); -1 when the budget is unlimited.
	StepsRemaining int `json:"stepsRemaining"`
	// Tier is the action's safety tier; "" when the evaluation ended before
	// the tier was determined, or when there was nothing to tier (no action
	// hint, no risk score, not blocked).
	Tier Tier `json:"tier,omitempty"`
	// Challenge means a person must answer a challenge before the action
	// runs (the verify tier).
	Challenge bool `json:"challenge,omitempty"`
	// RiskScore is the sanitized risk score; 0 when the action was not scored.
	RiskScore float64 `json:"riskScore"`
}

// failedReason is the reason given when the evaluation itself fails.
const failedReason = "Safety evaluation failed — pausing for human review"

// Evaluate decides whether an agent may take its next step. It runs the
// checks of the reference evaluator in its order, and the first that fails
// decides:
//
//  0. The risk score is sanitized (see SanitizeRiskScore).
//  1. Step budget: when Step >= MaxAutonomousSteps the run pauses (0 means
//     unlimited). A negative step count or budget pauses too.
//  2. Previous outcome: after a failure the run pauses; after a partial
//     success it continues. An outcome other than success, failure or
//     partial pauses.
//  3. Approval patterns: when a requiresApproval pattern matches the next
//     action hint (see MatchPattern), the run pauses. requiresApproval takes
//     precedence over autoApprove, and an autoApprove match only notes the
//     match among the factors: it skips no check, neither the safety tier nor
//     the danger zone nor the risk threshold. The patterns are matched even
//     when the hint is empty, so `*` pauses an action nobody described.
//  4. Safety tier (see TierFor), when there is a hint, a risk score or a
//     blocked command: the danger zone stops the agent (Stopped); the verify
//     tier pauses with a challenge; the confirm tier pauses unless the risk
//     tolerance is aggressive.
//  5. Risk threshold: a risk score above the tolerance's threshold (see
//     Threshold) pauses the run.
//
// Otherwise the run continues. Evaluate never panics: if anything inside
// it does, the answer is a pause for human review (Continue and Stopped
// false, StepsRemaining 0, the panic named in Factors), never a continue.
// It does not modify its input, and it allocates two objects: the text of
// the factors and reason, and the factors slice.
func Evaluate(in Input) Directive {
	return evaluate(in, nil)
}

// evaluate is Evaluate with a hook called as each check begins, so that the
// tests can make a check panic.
func evaluate(in Input, hook func(check string)) (d Directive) {
	defer func() {
		if v := recover(); v != nil {
			d = failed(in, v)
		}
	}()
	return decide(&in, hook)
}

// failed is the directive for an evaluation that panicked with v.
func failed(in Input, v any) Directive {
	var risk float64
	if in.RiskScore != nil {
		risk = SanitizeRiskScore(*in.RiskScore)
	}
	msg := fmt.Sprint(v)
	if len(msg) > 200 {
		msg = truncate(msg, 200) + "…"
	}
	return Directive{
		Reason:    failedReason,
		Factors:   []string{"Safety evaluation failed: " + msg},
		RiskScore: risk,
	}
}

// decide runs the checks. Every check that fails jumps to done, which
// turns the notes into the directive's factors and reason: the notes live
// in this function's frame, so a directive costs one string and one slice.
func decide(in *Input, hook func(string)) (d Directive) {
	var mem [512]byte
	n := notes(mem[:0])
	var lowMem [maxLowerHint]byte
	// Declared here, before the first goto, as Go requires.
	var (
		hint     = in.NextActionHint
		scored   = in.RiskScore != nil
		approved bool
		low      []byte
		step     = in.Step
		budget   int
	)
	enter := func(check string) {
		if hook != nil {
			hook(check)
		}
	}
	env := Defaults()
	if in.Envelope != nil {
		env = *in.Envelope
		if env.RiskTolerance == "" {
			env.RiskTolerance = defaultTolerance
		}
	}

	// 0. Sanitize the risk score before any check reads it.
	enter("sanitize")
	if scored {
		d.RiskScore = SanitizeRiskScore(*in.RiskScore)
	}

	// 1. Step budget.
	enter("steps")
	budget = env.MaxAutonomousSteps
	switch {
	case step < 0:
		n = n.str("Invalid step count ").int(step).factor()
		n = n.str("The run's step count is ").int(step).
			str(", which no run can have; pausing for human review").reason()
		goto done
	case budget < 0:
		n = n.str("Invalid maxAutonomousSteps=").int(budget).factor()
		n = n.str("The agent's maxAutonomousSteps is ").int(budget).
			str(" (want 0 for unlimited or a positive budget); pausing for human review").
			reason()
		goto done
	case budget == 0:
		d.StepsRemaining = -1
		n = n.str("Unlimited autonomous steps configured").factor()
	case step >= budget:
		n = n.str("Step ").uint(uint64(step) + 1).str(" exceeds maxAutonomousSteps=").int(budget).
			factor()
		n = n.str("Maximum autonomous steps reached (").int(budget).str("): the run has taken ").
			int(step).str(" steps, and a person must approve the next one").reason()
		goto done
	default:
		d.StepsRemaining = budget - step - 1
		n = n.str("Step ").int(step + 1).str(" of ").int(budget).str(" autonomous steps").factor()
	}

	// 2. The previous step's outcome.
	enter("outcome")
	switch in.PreviousOutcome {
	case "", portcullis.StepSuccess:
	case portcullis.StepPartial:
		n = n.str("Previous step partially succeeded; the run may continue").factor()
	case portcullis.StepFailure:
		n = n.str("Previous step failed").factor()
		n = n.str("Previous step failed; a person should review it before the run continues").
			reason()
		goto done
	default:
		n = n.str("Unknown previous step outcome ").quoteShort(string(in.PreviousOutcome)).
			factor()
		n = n.str("The previous step's outcome ").quoteShort(string(in.PreviousOutcome)).
			str(" is not success, failure or partial; pausing for human review").reason()
		goto done
	}

	// 3. Approval patterns. requiresApproval wins over autoApprove, and
	// autoApprove loosens nothing.
	enter("patterns")
	low = lowerHint(lowMem[:0], hint)
	for _, p := range env.RequiresApproval {
		if matchHint(p, hint, low) {
			n = n.str("Action matches requiresApproval pattern ").quote(p).factor()
			n = n.str("Action requires approval: the next action matches the requiresApproval pattern ").
				quote(p).reason()
			goto done
		}
	}
	for _, p := range env.AutoApprove {
		if matchHint(p, hint, low) {
			n = n.str("Action matches autoApprove pattern ").quote(p).
				str(" (the safety checks still apply)").factor()
			approved = true
			break
		}
	}
	if !approved {
		n = n.str("No approval pattern matches the next action").factor()
	}

	// 4. Safety tier.
	enter("tier")
	if hint != "" || scored || in.Blocked {
		danger := dangerPattern(hint)
		tier := scoreTier(d.RiskScore)
		if danger >= 0 || in.Blocked {
			tier = TierDangerZone
		}
		d.Tier = tier
		n = n.str("Safety tier: ").str(string(tier)).str(" (")
		switch {
		case danger >= 0 && in.Blocked:
			n = n.str("matches danger zone pattern ").str(dangerNames[danger]).
				str("; the shell classifier classified the action as blocked)").factor()
		case danger >= 0:
			n = n.str("matches danger zone pattern ").str(dangerNames[danger]).str(")").factor()
		case in.Blocked:
			n = n.str("the shell classifier classified the action as blocked)").factor()
		default:
			n = n.str("risk score ").float(d.RiskScore)
			switch tier {
			case TierAdvisory:
				n = n.str(" < ").int(confirmFrom)
			case TierConfirm:
				n = n.str(" >= ").int(confirmFrom)
			case TierVerify:
				n = n.str(" >= ").int(verifyFrom)
			default:
				n = n.str(" >= ").int(dangerFrom)
			}
			n = n.str(")").factor()
		}
		switch tier {
		case TierDangerZone:
			d.Stopped = true
			n = n.str("Action blocked: danger zone operation detected (")
			switch {
			case danger >= 0:
				n = n.str("the next action matches the danger pattern ").
					quote(dangerNames[danger])
			case in.Blocked:
				n = n.str("the shell classifier classified the action as blocked")
			default:
				n = n.str("risk score ").float(d.RiskScore).str(" is at or above ").
					int(dangerFrom)
			}
			n = n.str("). ")
			if in.Agent != "" {
				n = n.str("Agent ").quote(in.Agent)
			} else {
				n = n.str("The agent")
			}
			n = n.str(" is stopped until a person clears the block with the challenge's code").
				reason()
			goto done
		case TierVerify:
			d.Challenge = true
			n = n.str("Action requires verification before proceeding: risk score ").
				float(d.RiskScore).str(" is in the verify tier (").int(verifyFrom).str(" to ").
				int(dangerFrom - 1).str("), so a person must answer a challenge").reason()
			goto done
		case TierConfirm:
			if env.RiskTolerance == portcullis.Aggressive {
				n = n.str("Aggressive risk tolerance: the confirm tier continues").factor()
				break
			}
			n = n.str("Action requires confirmation before proceeding: risk score ").
				float(d.RiskScore).str(" is in the confirm tier (").int(confirmFrom).str(" to ").
				int(verifyFrom - 1).
				str("), which only an aggressive risk tolerance continues, and this agent's is ").
				tolerance(env.RiskTolerance).reason()
			goto done
		}
	}

	// 5. Risk score against the tolerance's threshold.
	enter("threshold")
	if scored {
		th := Threshold(env.RiskTolerance)
		if d.RiskScore > th {
			n = n.str("Risk ").float(d.RiskScore).str(" > threshold ").float(th).
				str(" for the ").tolerance(env.RiskTolerance).str(" tolerance").factor()
			n = n.str("Risk score ").float(d.RiskScore).str(" exceeds the threshold of ").
				float(th).str(" for the ").tolerance(env.RiskTolerance).str(" risk tolerance").
				reason()
			goto done
		}
		n = n.str("Risk ").float(d.RiskScore).str(" within threshold ").float(th).
			str(" for the ").tolerance(env.RiskTolerance).str(" tolerance").factor()
	}

	n = n.str("All autonomy checks passed").factor()
	d.Continue = true

done:
	if in.NoFactors {
		d.Factors, d.Reason = []string{}, n.reasonOnly()
		return d
	}
	d.Factors, d.Reason = n.strings()
	return d
}

// notes collects a directive's factors and reason in one buffer, so that a
// directive allocates one string for all of them, and one slice. A factor
// ends with a NUL byte and the reason with a SOH byte; neither occurs in the
// text, since everything that does not come from this package is quoted.
type notes []byte

const (
	endFactor = '\x00'
	endReason = '\x01'
)

// The methods of notes take and return it by value, so that the compiler
// can keep its buffer in the caller's frame.

func (n notes) str(s string) notes  { return append(n, s...) }
func (n notes) int(v int) notes     { return strconv.AppendInt(n, int64(v), 10) }
func (n notes) uint(v uint64) notes { return strconv.AppendUint(n, v, 10) }

// quote writes s in double quotes, escaped as Go would (so that a pattern
// or name cannot break the line or the sentence it is in).
func (n notes) quote(s string) notes {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' || c == '"' || c == '\\' {
			return strconv.AppendQuote(n, s)
		}
	}
	n = append(n, '"')
	n = append(n, s...)
	return append(n, '"')
}

// float writes a risk score: as an integer when it is one (the common
// case, and much cheaper), else in the shortest form that reads back exactly.
func (n notes) float(v float64) notes {
	if v >= 0 && v <= 100 && v == float64(int(v)) {
		return strconv.AppendInt(n, int64(v), 10)
	}
	return strconv.AppendFloat(n, v, 'f', -1, 64)
}

// quoteShort quotes s, cut to 64 bytes.
func (n notes) quoteShort(s string) notes {
	if len(s) > 64 {
		return append(strconv.AppendQuote(n, truncate(s, 64)), "…"...)
	}
	return strconv.AppendQuote(n, s)
}

// tolerance names a tolerance as Threshold treats it.
func (n notes) tolerance(t portcullis.RiskTolerance) notes {
	switch t {
	case portcullis.Conservative, portcullis.Moderate, portcullis.Aggressive:
		return append(n, t...)
	}
	return n.str("unknown ").quoteShort(string(t)).str(" (treated as conservative)")
}

// factor ends the text written since the last factor or reason as a factor.
func (n notes) factor() notes { return append(n, endFactor) }

// reason ends the text written since the last factor or reason as the reason.
func (n notes) reason() notes { return append(n, endReason) }

// strings returns the factors and the reason. The reason, when there is
// one, is the last text written.
func (n notes) strings() ([]string, string) {
	s := string(n)
	reason := ""
	if k := len(s) - 1; k >= 0 && s[k] == endReason {
		start := strings.LastIndexByte(s[:k], endFactor) + 1
		s, reason = s[:start], s[start:k]
	}
	fs := make([]string, strings.Count(s, "\x00"))
	for i := range fs {
		k := strings.IndexByte(s, endFactor)
		fs[i], s = s[:k], s[k+1:]
	}
	return fs, reason
}

// reasonOnly returns the reason alone, allocating only when there is one.
func (n notes) reasonOnly() string {
	k := len(n) - 1
	if k < 0 || n[k] != endReason {
		return ""
	}
	start := bytes.LastIndexByte(n[:k], endFactor) + 1
	return string(n[start:k])
}

// truncate cuts s to at most max bytes at a character boundary.
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return s[:max]
}
