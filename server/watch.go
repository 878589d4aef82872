package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/policy"
)

// ReloadInterval is how often a PolicyWatcher looks at the policy file.
const ReloadInterval = time.Second

// ReloadMetrics is what a PolicyWatcher tells the metrics.
type ReloadMetrics interface {
	PolicyLoaded(at time.Time, reload bool)
	PolicyReloadFailed()
}

// PolicyWatcher watches a policy file and puts each new version in force:
// hot reload. Every interval it reads the file and compares its SHA-256 with
// the policy in force; a new version is loaded and validated
// (policy.Load), compiled and swapped in atomically (gate.SetPolicy). A
// version that fails is rejected loudly — an error log, the
// portcullis_policy_reload_failures_total metric and an audit row of kind
// policy — and the last good policy stays in force. Each version is
// judged once: a rejected file is not retried until it changes again.
type PolicyWatcher struct {
	path    string
	gate    *gate.Gate
	store   portcullis.Store // audit rows; nil: none
	log     *slog.Logger
	metrics ReloadMetrics // nil: none
	every   time.Duration

	// loadedAt is when the policy in force was loaded (the console
	// shows it).
	loadedAt atomic.Pointer[time.Time]
	// rejected is the hash of the last version rejected.
	rejected string
	// unreadable counts the looks in a row that could not read the file.
	unreadable int
	// problem is why the file's newest version was rejected; "" when the
	// policy in force is the file's.
	problem atomic.Pointer[string]
}

// Problem says why the policy file's newest version is not in force ("":
// it is). The console shows it as a banner.
func (w *PolicyWatcher) Problem() string {
	if p := w.problem.Load(); p != nil {
		return *p
	}
	return ""
}

func (w *PolicyWatcher) setProblem(s string) { w.problem.Store(&s) }

// NewPolicyWatcher watches the policy file at path for g: reload
// rejections and reloads are audited in st (nil: not audited) and told to
// m (nil: no metrics). Run starts it.
func NewPolicyWatcher(path string, g *gate.Gate, st portcullis.Store, log *slog.Logger, m ReloadMetrics) *PolicyWatcher {
	w := &PolicyWatcher{path: path, gate: g, store: st, log: log, metrics: m, every: ReloadInterval}
	now := time.Now()
	w.loadedAt.Store(&now)
	if m != nil {
		m.PolicyLoaded(now, false)
	}
	return w
}

// LoadedAt tells when the policy in force was loaded.
func (w *PolicyWatcher) LoadedAt() time.Time { return *w.loadedAt.Load() }

// Run watches the file until ctx ends.
func (w *PolicyWatcher) Run(ctx context.Context) {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.check(ctx)
	}
}

// check looks at the file once and reloads it when it holds a new version.
// It reports whether a new policy was put in force.
func (w *PolicyWatcher) check(ctx context.Context) bool {
	data, err := os.ReadFile(w.path)
	if err != nil {
		// A file being replaced (written to a temporary name, then
		// renamed over) may be missing for a moment: only a file still
		// unreadable at the next look is rejected.
		w.unreadable++
		if w.unreadable > 1 {
			w.reject(ctx, "", fmt.Errorf("read policy %s: %w", w.path, err))
		}
		return false
	}
	w.unreadable = 0
	sum := sha256.Sum256(data)
	hash := "sha256:" + hex.EncodeToString(sum[:])
	old := w.gate.Policy()
	if hash == old.Hash {
		w.rejected = ""
		w.setProblem("")
		return false
	}
	if hash == w.rejected {
		return false
	}
	pol, warnings, err := policy.Load(w.path)
	if err == nil && pol.Hash != hash {
		// Changed again between the two reads: judge it at the next look.
		return false
	}
	if err == nil {
		err = sameValidator(old, pol)
	}
	if err == nil {
		err = w.gate.SetPolicy(pol)
	}
	if err != nil {
		w.reject(ctx, hash, err)
		return false
	}
	w.rejected = ""
	w.setProblem("")
	for _, wn := range warnings {
		w.log.Warn("policy warning", "policy", w.path, "warning", wn.String())
	}
	now := time.Now()
	w.loadedAt.Store(&now)
	if w.metrics != nil {
		w.metrics.PolicyLoaded(now, true)
	}
	w.log.Info("policy reloaded", "policy", w.path, "hash", pol.Hash, "previous", old.Hash)
	w.audit(ctx, pol.Hash, "reloaded "+w.path+" (previous version "+old.Hash+")")
	return true
}

// reject says loudly that a version of the file was not put in force.
func (w *PolicyWatcher) reject(ctx context.Context, hash string, err error) {
	if hash != "" && hash == w.rejected {
		return
	}
	if hash == "" && w.rejected == "unreadable" {
		return
	}
	if hash == "" {
		w.rejected = "unreadable"
	} else {
		w.rejected = hash
	}
	inForce := w.gate.Policy().Hash
	w.setProblem(err.Error())
	w.log.Error("policy reload rejected; the last good policy stays in force", "policy", w.path, "hash", hash, "inForce", inForce, "err", err)
	if w.metrics != nil {
		w.metrics.PolicyReloadFailed()
	}
	w.audit(ctx, hash, "rejected a new version of "+w.path+"; "+inForce+" stays in force: "+err.Error())
}

func (w *PolicyWatcher) audit(ctx context.Context, hash, detail string) {
	if w.store == nil {
		return
	}
	_, err := w.store.AppendAudit(ctx, portcullis.AuditEvent{
		Kind: portcullis.AuditPolicy, Time: time.Now().UTC(), PolicyHash: hash, Actor: "policy-watcher", Detail: detail,
	})
	if err != nil {
		w.log.Error("audit the policy reload", "policy", w.path, "err", err)
	}
}

// sameValidator refuses a reload that changes the validator's
// configuration or the policy document: the validator is built once, at
// start, from them, so such a change needs a restart.
func sameValidator(old, pol *portcullis.Policy) error {
	if !reflect.DeepEqual(old.Validator, pol.Validator) {
		return fmt.Errorf("the validator block changed: restart portcullis to apply it (a reload keeps the validator it started with)")
	}
	if old.PolicyDocument != pol.PolicyDocument {
		return fmt.Errorf("policyDocument changed from %q to %q: restart portcullis to apply it (the validator reads the document it started with)", old.PolicyDocument, pol.PolicyDocument)
	}
	return nil
}
