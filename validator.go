package portcullis

import (
	"context"
	"time"
)

// Validator is the independent LLM validator of the pipeline (stage 6): it
// reads the user's rules and the proposed action and allows or denies it.
// Package validator implements it on top of a Model.
//
// Validate never returns an allow it is not sure of: a timeout, a transport
// error, a refusal, a truncated or malformed answer, or missing rules all
// give a deny with FailClosed set (and a nil error). The error is for a
// request that is itself invalid.
type Validator interface {
	Validate(ctx context.Context, req ValidationRequest) (Verdict, error)
}

// ValidationMode says what the validator sees.
type ValidationMode string

// The validation modes.
const (
	// ValidateStateless sees only the ground rules and the action (h-cli's "Asimov" gate,
	// h-cli's "Asimov" gate): nothing the agent was told can charm it.
	ValidateStateless ValidationMode = "stateless"
	// ValidateContextual also sees the conversation, the user's prose policy,
	// the trigger of an automated run and whether the user is present
	// (Dispatch's permission gate).
	ValidateContextual ValidationMode = "contextual"
)

// ValidationRequest is one action for the validator to judge.
type ValidationRequest struct {
	// Mode overrides the validator's configured mode when set.
	Mode ValidationMode
	// Tool is the canonical tool name; Summary the action as people read it
	// (the tool's summary template, or the shell command).
	Tool    string
	Summary string
	// Args are the call's arguments (shown as data, never as instructions).
	Args map[string]any
	// Risk is the call's risk annotation after dynamic upgrades.
	Risk Risk
	// The validator reads its rules itself — the ground rules file
	// (stateless) or the user's prose policy document (contextual) — and a
	// missing or empty rules file is a fail-closed deny.

	// Conversation, Trigger and UserPresent are for the contextual mode.
	Conversation []Message
	Trigger      string
	UserPresent  bool
	// ContextSource says who stated Conversation and UserPresent. From an
	// untrusted source (ContextAgent) the conversation is shown as the
	// agent's claims, not as the user's words, and UserPresent is not
	// believed. Empty is ContextCaller (trusted).
	ContextSource ContextSource
	// Agent is the acting agent, for the validator's per-agent budget of
	// model calls.
	Agent string
	// PolicyWrite: the action edits the policy document; the validator
	// checks that the user actually asked for this change.
	PolicyWrite bool
}

// Verdict is the validator's answer.
type Verdict struct {
	Allow              bool    `json:"allow"`
	Reasoning          string  `json:"reasoning"`
	WhatWouldAuthorize string  `json:"whatWouldAuthorize"`
	Confidence         float64 `json:"confidence"`
	// FailClosed: the validator could not judge (timeout, error, refusal,
	// unparseable answer, no rules), so the action is denied.
	FailClosed bool `json:"failClosed"`
	// OverBudget: the agent's budget of validator calls was spent, so the
	// model was not asked (FailClosed is set too).
	OverBudget bool `json:"overBudget,omitempty"`
	// Telemetry for the audit row.
	Provider   string        `json:"provider"`
	Model      string        `json:"model"`
	PromptHash string        `json:"promptHash"`
	Latency    time.Duration `json:"latency"`
	Cached     bool          `json:"cached"`
}

// Model is a language model provider the validator asks: it sends one
// prompt and returns the model's answer. Providers (validator/anthropic,
// validator/openai, validator/command) implement it; they transport, they do
// not judge: the validator builds the prompt and parses the answer strictly.
type Model interface {
	Ask(ctx context.Context, p ModelPrompt) (ModelAnswer, error)
	// Name identifies the provider and model for telemetry, e.g.
	// "anthropic/claude-haiku-4-5".
	Name() string
}

// ModelPrompt is what a provider sends.
type ModelPrompt struct {
	// System is the instruction; User holds the delimited data (rules and
	// action) the model judges.
	System string
	User   string
	// Schema is the JSON schema of the verdict, for providers that can
	// constrain the answer (tool use, structured outputs); providers that
	// cannot ignore it and the prompt asks for the JSON in words.
	Schema []byte
	// MaxTokens bounds the answer.
	MaxTokens int
}

// ModelAnswer is a provider's raw answer.
type ModelAnswer struct {
	// Text is the answer: the verdict's JSON when the provider constrained
	// it, otherwise whatever the model wrote.
	Text string
	// Structured: Text came from a schema-constrained channel (a tool call,
	// structured output), not free text.
	Structured bool
	// Others are the answer's other parts, which a sound answer does not
	// have: a further tool call or choice (every verdict after the first),
	// and text beside a Structured answer. The validator refuses an answer
	// with any part here that is not blank: one verdict or none.
	Others []string
	// Refused: the model or provider refused to answer. Truncated: the
	// answer was cut off (max tokens). Either is a fail-closed deny.
	Refused   bool
	Truncated bool
	// Model is the model that answered, as the provider reports it.
	Model string
}
