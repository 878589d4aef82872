// Package validator is the independent LLM validator of Portcullis's
// pipeline (stage 6): it asks a language model whether one proposed action
// may run under the user's rules, and turns the answer into a
// portcullis.Verdict.
//
// It builds the prompt, parses the answer, caches verdicts and bounds the
// model call in time; the transport is a portcullis.Model (validator/anthropic,
// validator/openai — in a gateway, asked through the provider program by
// validator/remote — validator/command, or a fake in tests). Two modes:
//
//   - stateless (h-cli's "Asimov" gate): the model sees the ground
//     rules file and the action, nothing else — no conversation, no trigger,
//     no presence — so nothing the agent was told can charm it;
//   - contextual (Dispatch): the model also sees the user's prose
//     policy document, the conversation (the user's own newest messages first,
//     then the newest agent and tool messages, with a count of each left
//     out), the trigger of an automated run and whether the user is present.
//     What the agent stated itself (ContextSource agent) is shown as the
//     agent's unverified claims, never as the user's words.
//
// Everything that comes from the agent is data. Each piece of data sits in a
// block delimited by markers carrying a fresh random nonce, and any "<<<" in
// the data is broken up, so the data can neither close its block nor open a
// new one; strings are shown JSON-quoted, so they cannot span lines either.
//
// What it must not do: let an unsure answer through. A verdict is an allow
// only when the model's answer is exactly one well-formed verdict object
// saying "allow". A missing, unreadable or empty rules file, a timeout, a
// cancelled context, a transport error after the bounded retries, a refusal,
// a truncated or malformed answer, prose, two objects, a second tool call or
// choice, text beside a structured verdict, an unknown field, a confidence
// outside 0..1, a panicking model, or an agent past its budget of model
// calls all give a deny with FailClosed set. Nor must it tell the agent what
// a provider said when it failed: the verdict says only that the validator
// is unavailable (and the HTTP status); the provider's text goes to the
// log, with credentials masked. It never panics outward, never caches a fail-closed
// verdict, and never lowers a decision: the gate treats an allow as "no
// objection", not as a permission.
package validator
