package auditlog

import (
	"context"
	"fmt"
	"time"

	"github.com/portcullis/portcullis"
)

// Retention is what Prune lets go.
type Retention struct {
	// Before prunes the rows written before it (zero: none by age).
	Before time.Time
	// KeepRows keeps only the newest this many rows (0: none by count).
	KeepRows int64
}

// Prune deletes the rows the retention lets go and keeps in their place a
// checkpoint of the last one, signed with the audit key and dated now, so
// the rows after it still verify. It reports whether it pruned anything:
// nothing when no row is old enough or the rows are already pruned. A row
// missing from the middle of the log is an error: verify the log first.
func Prune(ctx context.Context, log portcullis.AuditLog, key string, now time.Time, r Retention) (portcullis.AuditCheckpoint, bool, error) {
	head, err := log.QueryAudit(ctx, portcullis.AuditQuery{Newest: true, Limit: 1})
	if err != nil || len(head) == 0 {
		return portcullis.AuditCheckpoint{}, false, err
	}
	var upTo int64
	if r.KeepRows > 0 && head[0].Seq > r.KeepRows {
		upTo = head[0].Seq - r.KeepRows
	}
	if !r.Before.IsZero() {
		old, err := log.QueryAudit(ctx, portcullis.AuditQuery{Until: r.Before, Newest: true, Limit: 1})
		if err != nil {
			return portcullis.AuditCheckpoint{}, false, err
		}
		if len(old) > 0 && old[0].Seq > upTo {
			upTo = old[0].Seq
		}
	}
	cur, hasCP, err := log.AuditCheckpoint(ctx)
	if err != nil {
		return portcullis.AuditCheckpoint{}, false, err
	}
	if upTo == 0 || (hasCP && upTo <= cur.Seq) {
		return portcullis.AuditCheckpoint{}, false, nil
	}
	row, err := log.QueryAudit(ctx, portcullis.AuditQuery{AfterSeq: upTo - 1, Limit: 1})
	if err != nil {
		return portcullis.AuditCheckpoint{}, false, err
	}
	if len(row) == 0 || row[0].Seq != upTo {
		return portcullis.AuditCheckpoint{}, false, fmt.Errorf("audit row %d is missing: run portcullis audit verify", upTo)
	}
	cp := portcullis.AuditCheckpoint{Seq: upTo, Hash: row[0].Hash, Time: now.UTC()}
	cp.Signature = SignCheckpoint(key, cp)
	if err := log.PruneAudit(ctx, cp); err != nil {
		return portcullis.AuditCheckpoint{}, false, err
	}
	return cp, true, nil
}
