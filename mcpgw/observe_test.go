package mcpgw_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/portcullis/portcullis/mcpgw"
)

// events is an Observer that keeps what it was told, as lines.
type events struct {
	mu    sync.Mutex
	lines []string
	ctxOK bool
}

type obsKey struct{}

func (o *events) add(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lines = append(o.lines, fmt.Sprintf(format, args...))
}

func (o *events) StartCall(ctx context.Context, tool, session, agent string) (context.Context, func(string, error)) {
	o.add("start %s agent=%s", tool, agent)
	return context.WithValue(ctx, obsKey{}, tool), func(result string, err error) { o.add("end %s %s err=%v", tool, result, err != nil) }
}

func (o *events) UpstreamCall(ctx context.Context, upstream, tool string, took time.Duration, isError bool, err error) {
	o.mu.Lock()
	// The call's context reaches the upstream call: a trace span started
	// by StartCall is the parent of the forward.
	o.ctxOK = ctx.Value(obsKey{}) != nil
	o.mu.Unlock()
	o.add("upstream %s %s isError=%v err=%v", upstream, tool, isError, err != nil)
}

func (o *events) UpstreamRestart(upstream string, err error) { o.add("restart %s", upstream) }

func (o *events) ApprovalWait(tool, result string, waited time.Duration) {
	o.add("wait %s %s", tool, result)
}

func (o *events) has(line string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Contains(o.lines, line)
}

func (o *events) snapshot() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.lines)
}

func TestObserverSeesCallsWaitsAndRestarts(t *testing.T) {
	obs := &events{}
	h := newHarness(t, testPolicy, func(c *mcpgw.Config) { c.Observer = obs })
	cs := h.connect(nil)

	call(t, cs, "read_note", map[string]any{"id": 1})
	call(t, cs, "delete_note", map[string]any{"id": 1})
	done := make(chan struct{})
	go func() { call(t, cs, "write_note", map[string]any{"id": 1}); close(done) }()
	a := waitPending(t, h.store)
	if _, err := h.gate.DenyApproval(context.Background(), a.ID, "ana", "no"); err != nil {
		t.Fatal(err)
	}
	<-done

	for _, want := range []string{
		"start read_note agent=bot", "upstream notes read_note isError=false err=false", "end read_note forwarded err=false",
		"start delete_note agent=bot", "end delete_note denied err=false",
		"start write_note agent=bot", "wait write_note denied", "end write_note held err=false",
	} {
		if !obs.has(want) {
			t.Errorf("the observer was not told %q; it was told %q", want, obs.snapshot())
		}
	}
	obs.mu.Lock()
	ctxOK := obs.ctxOK
	obs.mu.Unlock()
	if !ctxOK {
		t.Error("the forwarded call did not carry the context StartCall returned")
	}

	h.up.crash()
	deadline := time.Now().Add(15 * time.Second)
	for !obs.has("restart notes") {
		if time.Now().After(deadline) {
			t.Fatalf("no restart observed; told %q", obs.snapshot())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestObserverSeesATimedOutWait(t *testing.T) {
	obs := &events{}
	h := newHarness(t, testPolicy, func(c *mcpgw.Config) { c.Observer = obs; c.Wait = 50 * time.Millisecond })
	cs := h.connect(nil)
	call(t, cs, "write_note", map[string]any{"id": 9})
	if !obs.has("wait write_note timeout") {
		t.Errorf("told %q; want a timed-out wait", obs.snapshot())
	}
}
