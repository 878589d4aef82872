package portcullis

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// AuditKind says what an audit record is about.
type AuditKind string

// The audit kinds: every decision, and every human action.
const (
	AuditDecision AuditKind = "decision" // a call was decided
	AuditApproval AuditKind = "approval" // a person approved or denied a call
	AuditUnblock  AuditKind = "unblock"  // a block was cleared (with a code, or by an administrator)
	AuditGrant    AuditKind = "grant"    // a grant was made or revoked
	AuditPolicy   AuditKind = "policy"   // a policy was loaded or rejected
	AuditTool     AuditKind = "tool"     // a tool definition change was accepted
)

// AuditEvent is one row of the audit log, as the gate writes it. The store
// assigns Seq and chains it.
type AuditEvent struct {
	Kind       AuditKind `json:"kind"`
	Time       time.Time `json:"time"`
	DecisionID string    `json:"decisionId,omitempty"`
	Session    string    `json:"session,omitempty"`
	Agent      string    `json:"agent,omitempty"`
	Tool       string    `json:"tool,omitempty"`
	Outcome    Outcome   `json:"outcome,omitempty"`
	// Request is the call as decided, with redacted arguments replaced.
	Request *Call `json:"request,omitempty"`
	// Decision is the decision, with its trace.
	Decision *Decision `json:"decision,omitempty"`
	// PolicyHash names the policy version in force.
	PolicyHash string `json:"policyHash,omitempty"`
	// LatencyNS is how long the decision took.
	LatencyNS int64 `json:"latencyNs,omitempty"`
	// Validator records the validator's call, when one was made.
	Validator   *ValidatorRecord `json:"validator,omitempty"`
	UserPresent bool             `json:"userPresent,omitempty"`
	// Actor is the person (or administrator token) behind a human action.
	Actor string `json:"actor,omitempty"`
	// Detail is free text for human actions: a denial's reason, a policy
	// load error.
	Detail string `json:"detail,omitempty"`
}

// ValidatorRecord is what the audit keeps of a validator call.
type ValidatorRecord struct {
	Provider   string  `json:"provider"`
	Model      string  `json:"model"`
	PromptHash string  `json:"promptHash"`
	Verdict    string  `json:"verdict"`
	Confidence float64 `json:"confidence"`
	LatencyNS  int64   `json:"latencyNs"`
	Cached     bool    `json:"cached,omitempty"`
	FailClosed bool    `json:"failClosed,omitempty"`
	// OverBudget: the agent's budget of validator calls was spent; the
	// model was not asked.
	OverBudget bool `json:"overBudget,omitempty"`
}

// AuditRecord is a stored audit row: the event's canonical bytes and its
// place in the hash chain.
type AuditRecord struct {
	Seq int64 `json:"seq"`
	// Body is the event's canonical JSON, exactly as hashed.
	Body     json.RawMessage `json:"body"`
	PrevHash string          `json:"prevHash"`
	Hash     string          `json:"hash"`
	// Columns are the fields the store copied out of the body into
	// columns of its own for queries, as the store holds them now: nil
	// when the store keeps no copies. VerifyAudit checks them against the
	// body, since queries filter on them and not on the hashed body.
	Columns *AuditColumns `json:"-"`
}

// AuditColumns are the fields of an event that a store copies out of the
// body, so that queries (AuditQuery) can filter on them with an index.
type AuditColumns struct {
	Time       time.Time
	Kind       AuditKind
	DecisionID string
	Session    string
	Agent      string
	Tool       string
	Outcome    Outcome
	// TimeUnit is the resolution the store keeps Time at (0: the
	// nanosecond): the body's time, truncated to it, must equal Time.
	TimeUnit time.Duration
}

// ColumnsOf returns the columns a store copies out of ev.
func ColumnsOf(ev *AuditEvent) AuditColumns {
	return AuditColumns{
		Time: ev.Time, Kind: ev.Kind, DecisionID: ev.DecisionID, Session: ev.Session,
		Agent: ev.Agent, Tool: ev.Tool, Outcome: ev.Outcome,
	}
}

// columnsBody is the part of a body the copied columns come from.
type columnsBody struct {
	Kind       AuditKind `json:"kind"`
	Time       time.Time `json:"time"`
	DecisionID string    `json:"decisionId"`
	Session    string    `json:"session"`
	Agent      string    `json:"agent"`
	Tool       string    `json:"tool"`
	Outcome    Outcome   `json:"outcome"`
}

// columnKeys are the keys of columnsBody; afterColumns the keys that
// EncodeAuditBody writes after all of them (from AuditEvent's fields,
// whose order the encoding follows).
var columnKeys, afterColumns = func() (map[string]bool, map[string]bool) {
	cols, after := map[string]bool{}, map[string]bool{}
	ct := reflect.TypeFor[columnsBody]()
	for i := range ct.NumField() {
		cols[jsonKey(ct.Field(i))] = true
	}
	wt := reflect.TypeFor[AuditEvent]()
	seen := 0
	for i := range wt.NumField() {
		k := jsonKey(wt.Field(i))
		switch {
		case cols[k]:
			seen++
		case seen == len(cols):
			after[k] = true
		}
	}
	return cols, after
}()

func jsonKey(f reflect.StructField) string {
	k, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return k
}

// readColumnsBody reads the copied fields of a body. EncodeAuditBody puts
// them first, so it decodes only the body up to the first key written
// after all of them, not the request and decision that follow.
func readColumnsBody(body []byte) (columnsBody, error) {
	var b columnsBody
	err := json.Unmarshal(columnsPrefix(body), &b)
	return b, err
}

// columnsPrefix returns the body cut before its first top-level key that
// EncodeAuditBody writes after every copied column, closed as an object;
// the whole body when it meets anything else first (a key it does not
// know, a nested value), so that nothing is skipped unread.
func columnsPrefix(body []byte) []byte {
	if len(body) == 0 || body[0] != '{' {
		return body
	}
	inString, escaped := false, false
	for i := 1; i < len(body); i++ {
		c := body[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			return body
		case c == ',':
			rest := body[i+1:]
			if len(rest) < 2 || rest[0] != '"' {
				return body
			}
			end := bytes.IndexByte(rest[1:], '"')
			if end < 0 {
				return body
			}
			key := rest[1 : 1+end]
			switch {
			case columnKeys[string(key)]:
			case afterColumns[string(key)]:
				return append(body[:i:i], '}')
			default:
				return body
			}
		}
	}
	return body
}

// forgedColumn compares the record's copied columns with its body and
// returns the first column (by its name in the stores' tables) that does
// not match, and a sentence saying how; "" when all match or the store
// keeps no copies.
func (r *AuditRecord) forgedColumn() (column, problem string) {
	c := r.Columns
	if c == nil {
		return "", ""
	}
	b, err := readColumnsBody(r.Body)
	if err != nil {
		return "body", fmt.Sprintf("its body is not an audit event: %v", err)
	}
	want := b.Time
	if c.TimeUnit > 0 {
		want = want.Truncate(c.TimeUnit)
	}
	differs := func(name, got, want string) (string, string) {
		return name, fmt.Sprintf("its %s column says %q but its hashed body says %q (the column was edited)", name, got, want)
	}
	switch {
	case c.Kind != b.Kind:
		return differs("kind", string(c.Kind), string(b.Kind))
	case c.DecisionID != b.DecisionID:
		return differs("decision_id", c.DecisionID, b.DecisionID)
	case c.Session != b.Session:
		return differs("session", c.Session, b.Session)
	case c.Agent != b.Agent:
		return differs("agent", c.Agent, b.Agent)
	case c.Tool != b.Tool:
		return differs("tool", c.Tool, b.Tool)
	case c.Outcome != b.Outcome:
		return differs("outcome", string(c.Outcome), string(b.Outcome))
	case !c.Time.Equal(want):
		return differs("time", c.Time.UTC().Format(time.RFC3339Nano), want.UTC().Format(time.RFC3339Nano))
	}
	return "", ""
}

// Event decodes the record's body.
func (r *AuditRecord) Event() (AuditEvent, error) {
	var ev AuditEvent
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.UseNumber()
	if err := dec.Decode(&ev); err != nil {
		return AuditEvent{}, fmt.Errorf("audit row %d: %w", r.Seq, err)
	}
	return ev, nil
}

// GenesisHash is the PrevHash of the first row of a chain.
const GenesisHash = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// ChainHash is the hash of a row: SHA-256 over the previous row's hash, the
// row's sequence number and its body, so an edit, a deletion, a reordering
// or a row moved to another place all break the chain.
func ChainHash(prev string, seq int64, body []byte) string {
	c := chainHashers.Get().(*chainHasher)
	defer chainHashers.Put(c)
	c.h.Reset()
	buf := append(c.buf[:0], prev...)
	buf = append(buf, '\n')
	buf = strconv.AppendInt(buf, seq, 10)
	buf = append(buf, '\n')
	c.h.Write(buf)
	c.h.Write(body)
	var out [len("sha256:") + 2*sha256.Size]byte
	copy(out[:], "sha256:")
	hex.Encode(out[len("sha256:"):], c.h.Sum(c.sum[:0]))
	return string(out[:])
}

// chainHasher is a SHA-256 state with its buffers, kept between rows
// (chainHashers): every append and every verified row hashes one.
type chainHasher struct {
	h   hash.Hash
	buf [128]byte
	sum [sha256.Size]byte
}

var chainHashers = sync.Pool{New: func() any { return &chainHasher{h: sha256.New()} }}

// AuditQuery filters the audit log. Zero fields do not filter.
type AuditQuery struct {
	Session string
	Agent   string
	Tool    string
	Outcome Outcome
	Kind    AuditKind
	Since   time.Time // inclusive
	Until   time.Time // exclusive
	// AfterSeq and BeforeSeq page through the log: rows with AfterSeq < seq
	// < BeforeSeq (BeforeSeq 0: no upper bound).
	AfterSeq  int64
	BeforeSeq int64
	// Limit bounds the rows returned (0: the store's default, 100).
	Limit int
	// Newest returns the latest matching rows first.
	Newest bool
}

// AuditLog is the durable, hash-chained audit log.
type AuditLog interface {
	// AppendAudit writes events durably, in order, chained to the log, and
	// returns their records. When it returns nil the rows survive a crash:
	// an allowed call is forwarded only after this returns. Implementations
	// batch concurrent appends into one commit.
	AppendAudit(ctx context.Context, evs ...AuditEvent) ([]AuditRecord, error)
	// QueryAudit returns matching records in sequence order (or newest
	// first).
	QueryAudit(ctx context.Context, q AuditQuery) ([]AuditRecord, error)
	// ScanAudit calls fn for every record with seq > afterSeq, in order,
	// until fn returns false or an error. A store that copies fields of
	// the body into columns of its own returns them in Columns, as stored.
	ScanAudit(ctx context.Context, afterSeq int64, fn func(AuditRecord) (bool, error)) error
	// PruneAudit deletes the rows up to cp.Seq and keeps cp in their place,
	// in one transaction. cp.Hash must be the hash of row cp.Seq (else
	// INVALID_REQUEST); the caller signs cp.
	PruneAudit(ctx context.Context, cp AuditCheckpoint) error
	// AuditCheckpoint returns the checkpoint of the pruned prefix, if any.
	AuditCheckpoint(ctx context.Context) (AuditCheckpoint, bool, error)
}

// AuditCheckpoint stands for a pruned prefix of the log: the sequence
// number and hash of the last pruned row, signed by whoever pruned it, so
// the rows after it still verify.
type AuditCheckpoint struct {
	Seq       int64     `json:"seq"`
	Hash      string    `json:"hash"`
	Time      time.Time `json:"time"`
	Signature string    `json:"signature"`
}

// AuditVerification is the result of checking the chain.
type AuditVerification struct {
	// Rows is how many rows were checked.
	Rows int64 `json:"rows"`
	// FirstSeq and LastSeq are the sequence numbers checked.
	FirstSeq int64 `json:"firstSeq"`
	LastSeq  int64 `json:"lastSeq"`
	// BadSeq is the first row that does not verify (0: all verify), and
	// Problem says why. Column names the copied column that disagrees with
	// the row's body, when that is why.
	BadSeq  int64  `json:"badSeq,omitempty"`
	Problem string `json:"problem,omitempty"`
	Column  string `json:"column,omitempty"`
	// Anchors is how many heads kept outside the log were checked against
	// it; Unchecked how many could not be, because their rows were pruned.
	Anchors   int `json:"anchors,omitempty"`
	Unchecked int `json:"unchecked,omitempty"`
	// HeadHash is the hash of the last row: keep it to detect a later
	// truncation of the tail.
	HeadHash string `json:"headHash"`
}

// OK reports whether every row verified.
func (v *AuditVerification) OK() bool { return v.BadSeq == 0 }

// AuditAnchor is a head of the chain kept outside the log — noted by a
// person, or published to a witness — that the log must still contain.
type AuditAnchor struct {
	Seq  int64
	Hash string
	// From names where the head was kept, for the report.
	From string
}

// VerifyAudit checks the hash chain of the log from its start (or from the
// checkpoint of a pruned prefix): every sequence number follows the one
// before, every row names the previous row's hash, every hash matches its
// row, and every column the store copied out of a row's body still says
// what the body says. It stops at the first row that does not verify.
func VerifyAudit(ctx context.Context, log AuditLog, cp *AuditCheckpoint) (AuditVerification, error) {
	return VerifyAuditAnchors(ctx, log, cp, nil)
}

// VerifyAuditAnchors is VerifyAudit that also checks the log against heads
// kept outside it: the row of each anchor must carry the anchor's hash,
// and the log must reach the newest anchor, so a log rewritten — however
// consistently — after a head was kept does not verify. Anchors before the
// checkpoint of a pruned prefix cannot be checked and are counted in
// Unchecked.
func VerifyAuditAnchors(ctx context.Context, log AuditLog, cp *AuditCheckpoint, anchors []AuditAnchor) (AuditVerification, error) {
	var v AuditVerification
	prev, next := GenesisHash, int64(1)
	if cp != nil {
		prev, next = cp.Hash, cp.Seq+1
	}
	v.HeadHash = prev
	sorted := slices.Clone(anchors)
	slices.SortStableFunc(sorted, func(a, b AuditAnchor) int { return cmp.Compare(a.Seq, b.Seq) })
	// Anchors at the starting point: the checkpoint (or the genesis).
	i := 0
	for ; i < len(sorted) && sorted[i].Seq < next; i++ {
		a := sorted[i]
		switch {
		case a.Seq < next-1:
			v.Unchecked++
		case a.Hash != prev:
			v.BadSeq = max(a.Seq, 1)
			v.Problem = fmt.Sprintf("row %d has hash %s, but %s kept %s for it (the log was rewritten)", a.Seq, prev, a.From, a.Hash)
			return v, nil
		default:
			v.Anchors++
		}
	}
	err := log.ScanAudit(ctx, next-1, func(r AuditRecord) (bool, error) {
		if v.Rows == 0 {
			v.FirstSeq = r.Seq
		}
		switch {
		case r.Seq != next:
			v.BadSeq, v.Problem = next, fmt.Sprintf("row %d is missing (found row %d next)", next, r.Seq)
		case r.PrevHash != prev:
			v.BadSeq, v.Problem = r.Seq, "its previous hash does not match the row before it"
		case ChainHash(prev, r.Seq, r.Body) != r.Hash:
			v.BadSeq, v.Problem = r.Seq, "its contents do not match its hash (edited)"
		default:
			if col, problem := r.forgedColumn(); col != "" {
				v.BadSeq, v.Problem, v.Column = r.Seq, problem, col
			}
		}
		for ; v.BadSeq == 0 && i < len(sorted) && sorted[i].Seq == r.Seq; i++ {
			if a := sorted[i]; a.Hash != r.Hash {
				v.BadSeq = r.Seq
				v.Problem = fmt.Sprintf("its hash is %s, but %s kept %s for it (the log was rewritten)", r.Hash, a.From, a.Hash)
			} else {
				v.Anchors++
			}
		}
		if v.BadSeq != 0 {
			return false, nil
		}
		v.Rows++
		v.LastSeq = r.Seq
		prev, next = r.Hash, r.Seq+1
		v.HeadHash = prev
		return true, nil
	})
	if err == nil && v.BadSeq == 0 && i < len(sorted) {
		a := sorted[len(sorted)-1]
		v.BadSeq = next
		v.Problem = fmt.Sprintf("the log ends at row %d, but %s kept a head at row %d (rows were removed from the end)", next-1, a.From, a.Seq)
	}
	return v, err
}
