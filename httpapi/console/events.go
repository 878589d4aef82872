package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/portcullis/portcullis"
)

// keepAlive is how often an idle event stream sends a comment, so proxies
// and browsers keep it open.
const keepAlive = 25 * time.Second

// events streams server-sent events to a logged-in page: "change" (what
// changed: {"kind","id"}, never a code) whenever the store or the gate's
// notices say something changed, and "pending" (the number of pending
// approvals) after each approval change. The page's script re-reads its
// main region on the changes it shows. The stream ends with the session,
// the request, or Close.
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	s := c.currentSession(r)
	if s == nil {
		http.Error(w, "not logged in", http.StatusUnauthorized)
		return
	}
	ctx := r.Context()
	feed, err := c.store.Watch(ctx)
	if err != nil {
		c.log.Error("console: watch the store", "err", err)
		http.Error(w, "live updates are unavailable", http.StatusServiceUnavailable)
		return
	}
	notes, unsubscribe := c.notices.subscribe()
	defer unsubscribe()

	rc := http.NewResponseController(w)
	// A server's WriteTimeout must not cut a stream that is meant to last.
	if err := rc.SetWriteDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		c.log.Warn("console: event stream: lift the write deadline", "err", err)
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(event, data string) bool {
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	pending := func() bool {
		return send("pending", fmt.Sprint(c.pendingCount(ctx)))
	}
	if _, err := fmt.Fprint(w, "retry: 3000\n\n"); err != nil || !pending() {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		var ch portcullis.Change
		var ok bool
		select {
		case <-ctx.Done():
			return
		case <-c.done:
			return
		case <-s.done:
			return
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
			continue
		case ch, ok = <-feed:
			if !ok {
				return // the store ended the watch; the browser reconnects
			}
		case ch = <-notes:
		}
		b, err := json.Marshal(ch)
		if err != nil || !send("change", string(b)) {
			return
		}
		if ch.Kind == portcullis.ChangeApproval || ch.Kind == portcullis.ChangeResync {
			if !pending() {
				return
			}
		}
	}
}
