package auditlog

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/portcullis/portcullis"
)

// SignCheckpoint signs the checkpoint of a pruned prefix with the audit
// key: "hmac-sha256:" and the hex HMAC-SHA256 of the checkpoint's
// sequence number, hash and time.
func SignCheckpoint(key string, cp portcullis.AuditCheckpoint) string {
	return sign(key, "portcullis audit checkpoint", cp)
}

// SignHead signs a head of the chain published to a witness with the
// audit key. It is not SignCheckpoint: a published head must not pass for
// a prune checkpoint.
func SignHead(key string, h portcullis.AuditCheckpoint) string {
	return sign(key, "portcullis audit head", h)
}

func sign(key, purpose string, cp portcullis.AuditCheckpoint) string {
	m := hmac.New(sha256.New, []byte(key))
	fmt.Fprintf(m, "%s\n%d\n%s\n%s", purpose, cp.Seq, cp.Hash, cp.Time.UTC().Format(time.RFC3339Nano))
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
}

// HeadSource is a witness whose kept heads can be read back
// (witness.Reader is one).
type HeadSource interface {
	// Name names the witness in reports.
	Name() string
	// Heads returns every head the witness kept.
	Heads(ctx context.Context) ([]portcullis.AuditCheckpoint, error)
}

// VerifyOptions says what Verify checks beyond the chain itself.
type VerifyOptions struct {
	// Key returns the audit key that signed the checkpoint of a pruned
	// prefix and the witnesses' heads. It is called only when there is a
	// checkpoint or a witness.
	Key func() (string, error)
	// Anchors are heads kept earlier (noted by a person) that the log must
	// still hold.
	Anchors []portcullis.AuditAnchor
	// Witnesses are read back; each must have kept at least one head,
	// every head must be signed with Key, and the log must hold them all.
	Witnesses []HeadSource
	// Progress, when set, is called after every ProgressEvery rows
	// checked (default 100,000) with the count and the row reached.
	Progress      func(rows, seq int64)
	ProgressEvery int64
}

// Report is what Verify found.
type Report struct {
	// Verification is the chain's check; Verification.OK says whether the
	// log verifies.
	Verification portcullis.AuditVerification
	// Checkpoint is the signed checkpoint the check started from (nil:
	// from the start of the log).
	Checkpoint *portcullis.AuditCheckpoint
	// Kept is how many heads kept outside the log were given (anchors and
	// witnesses' heads); Verification.Anchors of them were checked.
	Kept int
	// Index says what is wrong with the store's lookup tables of the log
	// (IndexChecker), "" when nothing is or the store keeps none. Checked
	// only when the chain verifies.
	Index string
}

// IndexChecker is a store that keeps the log's lookups (by session,
// agent, tool and time) in tables of its own, which an edit can make miss
// rows the chain still holds: the SQLite store. PostgreSQL's indexes are
// the database's and are not checked.
type IndexChecker interface {
	// CheckAuditIndex returns what is wrong with the lookup tables ("":
	// they hold exactly the log's rows), or the store's error.
	CheckAuditIndex(ctx context.Context) (string, error)
}

// OK reports whether the log verifies: its chain, and the store's lookup
// tables of it.
func (r *Report) OK() bool { return r.Verification.OK() && r.Index == "" }

// Head returns the sequence number of the chain's head: the last row, or
// the checkpoint when no row follows it.
func (r *Report) Head() int64 {
	if r.Verification.Rows == 0 && r.Checkpoint != nil {
		return r.Checkpoint.Seq
	}
	return r.Verification.LastSeq
}

// VerifyError says that the log cannot be trusted for a reason outside its
// rows: the checkpoint of its pruned prefix or a witness's head does not
// carry the audit key's signature, the key is missing, or a witness
// cannot be read or kept nothing.
type VerifyError struct{ Reason string }

func (e *VerifyError) Error() string { return e.Reason }

func failf(format string, args ...any) error {
	return &VerifyError{Reason: fmt.Sprintf(format, args...)}
}

// Verify checks the log's chain (portcullis.VerifyAuditAnchors) from the
// signed checkpoint of its pruned prefix, if any, against the anchors and
// the heads every witness kept. A log whose rows do not verify is a
// Report whose Verification is not OK, with a nil error; a checkpoint or
// witness that cannot be trusted is a *VerifyError; anything else is the
// store's or a witness's error. When the chain verifies and the store is
// an IndexChecker, Verify checks its lookup tables too (Report.Index).
func Verify(ctx context.Context, log portcullis.AuditLog, opts VerifyOptions) (Report, error) {
	var rep Report
	cp, ok, err := log.AuditCheckpoint(ctx)
	if err != nil {
		return rep, err
	}
	if ok {
		key, err := key(opts)
		if err != nil {
			return rep, failf("the log was pruned up to row %d, but its checkpoint cannot be checked: %v", cp.Seq, err)
		}
		if !hmac.Equal([]byte(SignCheckpoint(key, cp)), []byte(cp.Signature)) {
			return rep, failf("the checkpoint of the pruned rows (up to row %d) has a bad signature: the log was tampered with", cp.Seq)
		}
		rep.Checkpoint = &cp
	}
	anchors := slices.Clone(opts.Anchors)
	kept, err := witnessAnchors(ctx, opts)
	if err != nil {
		return rep, err
	}
	anchors = append(anchors, kept...)
	rep.Kept = len(anchors)
	every := opts.ProgressEvery
	if every <= 0 {
		every = 100000
	}
	var scanned portcullis.AuditLog = log
	if opts.Progress != nil {
		scanned = &progressLog{AuditLog: log, fn: opts.Progress, every: every}
	}
	rep.Verification, err = portcullis.VerifyAuditAnchors(ctx, scanned, rep.Checkpoint, anchors)
	if err != nil || !rep.Verification.OK() {
		return rep, err
	}
	if ic, ok := log.(IndexChecker); ok {
		rep.Index, err = ic.CheckAuditIndex(ctx)
	}
	return rep, err
}

func key(opts VerifyOptions) (string, error) {
	if opts.Key == nil {
		return "", fmt.Errorf("no audit key was given")
	}
	return opts.Key()
}

// witnessAnchors reads the heads every witness kept and checks their
// signatures.
func witnessAnchors(ctx context.Context, opts VerifyOptions) ([]portcullis.AuditAnchor, error) {
	if len(opts.Witnesses) == 0 {
		return nil, nil
	}
	key, err := key(opts)
	if err != nil {
		return nil, failf("the witnesses' heads cannot be checked without the audit key: %v", err)
	}
	var out []portcullis.AuditAnchor
	for _, w := range opts.Witnesses {
		heads, err := w.Heads(ctx)
		if err != nil {
			return nil, failf("read the heads of witness %s: %v", w.Name(), err)
		}
		if len(heads) == 0 {
			return nil, failf("witness %s kept no heads", w.Name())
		}
		for i, h := range heads {
			if !hmac.Equal([]byte(SignHead(key, h)), []byte(h.Signature)) {
				return nil, failf("witness %s: head %d (row %d, published %s) has a bad signature: this gateway's audit key did not sign it", w.Name(), i+1, h.Seq, h.Time.Format(time.RFC3339))
			}
			out = append(out, portcullis.AuditAnchor{Seq: h.Seq, Hash: h.Hash, From: fmt.Sprintf("witness %s (head published %s)", w.Name(), h.Time.Format(time.RFC3339))})
		}
	}
	return out, nil
}

// progressLog reports the rows a scan has passed.
type progressLog struct {
	portcullis.AuditLog
	fn    func(rows, seq int64)
	every int64
	n     int64
}

func (p *progressLog) ScanAudit(ctx context.Context, after int64, fn func(portcullis.AuditRecord) (bool, error)) error {
	return p.AuditLog.ScanAudit(ctx, after, func(r portcullis.AuditRecord) (bool, error) {
		p.n++
		if p.n%p.every == 0 {
			p.fn(p.n, r.Seq)
		}
		return fn(r)
	})
}
