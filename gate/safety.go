package gate

import (
	"context"
	"strconv"
	"strings"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/autonomy"
	"github.com/portcullis/portcullis/shell"
)

// shellCommand classifies a shell tool's command and sets the call's level
// from it: safe → a read (AUTO_APPROVE), moderate → EXECUTE
// (CONFIRM_SINGLE_USE), dangerous → CONFIRM_SINGLE_USE that no element can
// lift, blocked → DENY. An explicit defaultLevel of the tool is a floor. It
// returns true when it ended the decision.
func (e *eval) shellCommand(r *route, result *string) bool {
	cmd, ok := e.c.Args[r.shellArg].(string)
	if !ok || strings.TrimSpace(cmd) == "" {
		e.level = portcullis.ConfirmSingleUse.Stricter(r.level)
		e.endpointOverride = portcullis.Execute
		*result += "; no command in argument " + quote(r.shellArg) + ": confirmed every time"
		return false
	}
	cl := e.pol.shell.Classify(cmd)
	e.shellClass = &cl
	why := "; command classified " + string(cl.Category) + " (risk " + strconv.Itoa(cl.RiskScore) + ")"
	if len(cl.Reasons) > 0 {
		why += ": " + strings.Join(cl.Reasons, "; ")
	}
	switch cl.Category {
	case shell.Safe:
		e.level, e.endpointOverride = portcullis.AutoApprove, portcullis.Read
	case shell.Moderate:
		e.level, e.endpointOverride = portcullis.ConfirmSingleUse, portcullis.Execute
	case shell.Dangerous:
		e.level, e.endpointOverride = portcullis.ConfirmSingleUse, portcullis.Execute
		e.elevatable = false
	default: // blocked, or anything the classifier may add later
		e.level, e.endpointOverride = portcullis.Deny, portcullis.Execute
		e.end(&portcullis.TraceEntry{Stage: "route", Result: *result + why}, ending{
			outcome: portcullis.OutcomeDeny, level: portcullis.Deny, code: portcullis.CodeBlockedCommand,
			reason:    "The command is blocked: " + strings.Join(cl.Reasons, "; "),
			authorize: "nothing an agent can do: a person runs this command outside the agent, if at all",
		})
		return true
	}
	if r.level.Valid() {
		e.level = e.level.Stricter(r.level)
	}
	*result += why
	return false
}

// autonomyStage re-authorizes a step of an autonomous run (docs/ARCHITECTURE.md, stage "autonomy"): the
// step budget, the previous step's outcome, the approval patterns, the
// safety tier and the risk tolerance. A pause needs a person
// (CONFIRM_SINGLE_USE, AUTONOMY_PAUSE); a stop blocks the agent in the
// danger zone. It returns true when it ended the decision.
func (e *eval) autonomyStage(ctx context.Context) bool {
	run := e.c.Run
	in := autonomy.Input{Agent: e.c.Agent, Envelope: e.pol.agents[e.c.Agent]}
	src := "request"
	if st := e.g.store; st != nil && run.ID != "" {
		var (
			state portcullis.RunState
			err   error
		)
		if e.dry {
			state, _, err = st.RunState(ctx, run.ID)
		} else {
			state, err = st.RecordStep(ctx, run.ID, e.c.Agent, e.g.clock.Now())
		}
		if err != nil {
			e.failClosed("autonomy", err)
			return true
		}
		in.Step, in.PreviousOutcome = state.Steps, state.LastOutcome
		src = "store"
	}
	// What the request says overrides what the store remembers.
	if run.Step > 0 {
		in.Step = run.Step
	}
	if run.PreviousOutcome != "" {
		in.PreviousOutcome = run.PreviousOutcome
	}
	in.RiskScore = run.RiskScore
	if in.RiskScore == nil {
		var score float64
		if e.shellClass != nil {
			score = float64(e.shellClass.RiskScore)
		} else {
			score = autonomy.Score(e.endpoint(), e.elevatable)
		}
		in.RiskScore = &score
	}
	in.NextActionHint = run.NextActionHint
	if in.NextActionHint == "" {
		in.NextActionHint = e.actionSummary()
	}
	in.Blocked = e.shellClass != nil && e.shellClass.Category == shell.Blocked
	in.NoFactors = true

	d := autonomy.Evaluate(in)
	// The step's facts, written into one stack buffer after the verdict:
	// this runs on every step of every run, so a continue allocates only
	// its trace line (and, with a store, its one fact).
	var buf [192]byte
	facts := func(b []byte) []byte {
		b = append(b, "step "...)
		b = strconv.AppendInt(b, int64(in.Step), 10)
		b = append(b, " (run state from the "...)
		b = append(b, src...)
		b = append(b, "), risk "...)
		b = strconv.AppendFloat(b, d.RiskScore, 'f', -1, 64)
		if d.Tier != "" {
			b = append(b, ", tier "...)
			b = append(b, d.Tier...)
		}
		return b
	}
	switch {
	case d.Stopped:
		e.level = portcullis.Deny
		e.source, e.sourceElement, e.matchedPolicy, e.conflicts = portcullis.SourceAutonomy, "", "", nil
		result := "stop: " + d.Reason + " (" + string(facts(buf[:0])) + ")"
		var challenge string
		blockFailed := false
		switch {
		case e.dry:
			result += "; explain or shadow: no block written"
		case e.g.store == nil:
			result += "; this gate has no store, so the block cannot be kept"
		case e.c.Agent == "":
			result += "; the request names no agent, so no block can be kept"
		default:
			id, err := e.g.BlockAgent(ctx, e.c.Agent, d.Reason, e.d.DecisionID)
			if err != nil {
				result += "; the block could not be written: " + err.Error()
				blockFailed = true
			} else {
				challenge = id
				result += "; agent blocked, challenge " + id
			}
		}
		e.end(e.stepEntry(result, in.Step, src == "store"), ending{
			outcome: portcullis.OutcomeStop, level: portcullis.Deny, code: portcullis.CodeDangerZone,
			reason:     "The agent's next step is in the danger zone: " + d.Reason,
			authorize:  "a person clearing the block with the code shown to them (portcullis unblock AGENT --challenge ID --code CODE)",
			challenge:  challenge,
			failClosed: blockFailed,
		})
		return true
	case !d.Continue:
		e.paused, e.pauseReason = true, d.Reason
		e.level = e.level.Stricter(portcullis.ConfirmSingleUse)
		e.source, e.sourceElement, e.matchedPolicy = portcullis.SourceAutonomy, "", ""
		e.record(*e.stepEntry("pause: "+d.Reason+" ("+string(facts(buf[:0]))+")", in.Step, src == "store"))
	default:
		b := facts(append(buf[:0], "continue: "...))
		b = append(b, "; "...)
		if d.StepsRemaining >= 0 {
			b = strconv.AppendInt(b, int64(d.StepsRemaining), 10)
			b = append(b, " steps remain"...)
		} else {
			b = append(b, "unlimited steps remain"...)
		}
		e.record(*e.stepEntry(string(b), in.Step, src == "store"))
	}
	return false
}

// factsRunStateFromStore marks an autonomy stage that read the run's state
// from the store.
var factsRunStateFromStore = []portcullis.Fact{portcullis.FactRunStateFromStore}

// stepEntry is the autonomy stage's trace entry: its result, the step it
// judged and whether the run's state came from the store.
func (e *eval) stepEntry(result string, step int, fromStore bool) *portcullis.TraceEntry {
	t := &portcullis.TraceEntry{Stage: "autonomy", Result: result, Step: step}
	if fromStore {
		t.Facts = factsRunStateFromStore
	}
	return t
}

// actionSummary describes the call for people, the validator and the
// approval patterns: the tool's summary template over its arguments, the
// shell command of a shell tool, or the tool's name.
func (e *eval) actionSummary() string {
	if e.r != nil && e.r.shellArg != "" {
		if cmd, ok := e.c.Args[e.r.shellArg].(string); ok {
			return e.canonical + ": " + cmd
		}
	}
	return e.summary()
}

// RecordOutcome records how a step of an autonomous run ended (an MCP
// result with isError, a failed command): the autonomy stage pauses the run
// after a failure. Adapters call it after forwarding an allowed call.
func (g *Gate) RecordOutcome(ctx context.Context, runID string, outcome portcullis.StepOutcome) error {
	if g.store == nil || runID == "" {
		return nil
	}
	return g.store.RecordOutcome(ctx, runID, outcome, g.clock.Now())
}
