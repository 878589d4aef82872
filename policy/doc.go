// Package policy reads Portcullis policy files: it loads, validates and
// lints the YAML policy file into a *portcullis.Policy, and it loads and
// runs policy unit-test files (`portcullis policy test`).
//
// Everything a policy file says is checked here, at load time. An unknown
// key, a value of the wrong kind, an unknown level, endpoint or element type,
// a malformed pattern or a name used twice is an error that names the file,
// the line and the field, so a typo never silently weakens a policy. A policy
// that is legal but probably not what its author meant loads with warnings,
// and its lists are cleaned (ungatable operations removed, duplicates
// dropped) the same way whether it came from a file (Load, Parse) or was
// built in code (Validate).
//
// The package must not decide calls. It does not evaluate element lists,
// classify shell commands, check shell rules' match examples, call a
// validator or touch a store: those belong to the packages that consume the
// Policy. It imports only the standard library, the root package and
// gopkg.in/yaml.v3, never the gate or an adapter.
package policy
