package portcullis

import (
	"context"
	"time"
)

// Block is a danger-zone stop of an agent: every call of the agent is
// stopped until a person clears it with the code of its challenge. A block
// must be stored durably: it survives a crash or a restart.
type Block struct {
	Agent       string    `json:"agent"`
	Reason      string    `json:"reason"`
	ChallengeID string    `json:"challengeId"`
	DecisionID  string    `json:"decisionId"`
	CreatedAt   time.Time `json:"createdAt"`
}

// Challenge is an out-of-band verification. The agent is told only its ID;
// the code is shown on human channels and stored only as a salted, slow
// hash.
type Challenge struct {
	ID    string `json:"id"`
	Agent string `json:"agent"`
	// Salt and CodeHash are hex: PBKDF2-SHA256 of the code under the salt.
	Salt      string    `json:"salt"`
	CodeHash  string    `json:"codeHash"`
	Reason    string    `json:"reason"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// RunState is what the gate remembers of an autonomous run between steps.
type RunState struct {
	RunID       string      `json:"runId"`
	Agent       string      `json:"agent"`
	Steps       int         `json:"steps"`
	LastOutcome StepOutcome `json:"lastOutcome,omitempty"`
	UpdatedAt   time.Time   `json:"updatedAt"`
}

// Notice is a message for the people who watch the gateway: a call waiting
// for approval, or an agent stopped in the danger zone.
type Notice struct {
	Kind        NoticeKind `json:"kind"`
	Agent       string     `json:"agent,omitempty"`
	Session     string     `json:"session,omitempty"`
	Tool        string     `json:"tool,omitempty"`
	DecisionID  string     `json:"decisionId"`
	ChallengeID string     `json:"challengeId,omitempty"`
	Reason      string     `json:"reason"`
	// Code is the verification code of a danger-zone challenge. A Notifier
	// must deliver it only on a human channel, never where an agent reads.
	Code      string    `json:"code,omitempty"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	// Link is where a person acts on the notice (the console's page of
	// the approval request, or of the blocks), set by a gateway that
	// serves a console; empty otherwise.
	Link string `json:"link,omitempty"`
}

// NoticeKind says what a Notice is about.
type NoticeKind string

// The notice kinds.
const (
	NoticeApproval NoticeKind = "approval" // a call waits for a person
	NoticeBlock    NoticeKind = "block"    // an agent was stopped; Code clears it
	// NoticeToolChange: an upstream tool's definition changed; calls to it
	// are held until a person accepts the change. Tool names it as
	// "upstream/tool".
	NoticeToolChange NoticeKind = "tool-change"
	// NoticePendingLimit: an agent (or one of its sessions) has as many
	// approval requests waiting as the policy allows, and its further
	// calls that need a person are refused. Sent once each time the cap
	// is reached, not for every refused call.
	NoticePendingLimit NoticeKind = "pending-limit"
)

// Notifier tells people what needs them. Implementations deliver to human
// channels only (the gateway's terminal, the console, a desktop
// notification, a webhook marked human). A failed notification does not
// change a decision.
type Notifier interface {
	Notify(ctx context.Context, n Notice) error
}

// SafetyStore is the part of the Store that keeps agent safety state:
// danger-zone blocks, challenges, failed verification attempts and run
// state. Every method is atomic.
type SafetyStore interface {
	// PutBlock records a block for b.Agent, replacing any earlier one.
	PutBlock(ctx context.Context, b Block) error
	// Block returns the agent's block, if it has one.
	Block(ctx context.Context, agent string) (Block, bool, error)
	// DeleteBlock clears the agent's block; NOT_FOUND when there is none.
	DeleteBlock(ctx context.Context, agent string) error
	// Blocks lists every block.
	Blocks(ctx context.Context) ([]Block, error)

	// CreateChallenge records a challenge. The ID must be set and new.
	CreateChallenge(ctx context.Context, c Challenge) error
	// Challenge returns a challenge; NOT_FOUND when there is none.
	Challenge(ctx context.Context, id string) (Challenge, error)
	// DeleteChallenge removes a challenge (it was answered).
	DeleteChallenge(ctx context.Context, id string) error

	// AddFailedAttempt records a wrong verification code for the agent at
	// the given time and returns how many failures the agent has since
	// `since` (including this one).
	AddFailedAttempt(ctx context.Context, agent string, at, since time.Time) (int, error)
	// FailedAttempts counts the agent's failures since the given time.
	FailedAttempts(ctx context.Context, agent string, since time.Time) (int, error)

	// RecordStep counts one more step of the run and returns the state as it
	// was before this step.
	RecordStep(ctx context.Context, runID, agent string, at time.Time) (RunState, error)
	// RecordOutcome records the outcome of the run's latest step.
	RecordOutcome(ctx context.Context, runID string, outcome StepOutcome, at time.Time) error
	// RunState returns a run's state; ok is false for a run never seen.
	RunState(ctx context.Context, runID string) (RunState, bool, error)
}
