package validator_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/validator"
)

// fakeClock is a portcullis.Clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestCacheHitAndExpiry(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := answering(allowJSON)
	v := newValidator(t, m, validator.Config{CacheTTL: time.Minute, Clock: clock})

	first := validate(t, v, pingRequest)
	second := validate(t, v, pingRequest)
	if first.Cached || !second.Cached || m.calls.Load() != 1 {
		t.Fatalf("two identical validations: cached %v, %v after %d calls; want a miss, then a hit, 1 call", first.Cached, second.Cached, m.calls.Load())
	}
	if !second.Allow || second.PromptHash != first.PromptHash || second.Provider != "fake" {
		t.Errorf("cached verdict %+v; want the first one's", second)
	}

	clock.Advance(59 * time.Second)
	if vd := validate(t, v, pingRequest); !vd.Cached {
		t.Errorf("at 59s of a 1m TTL: not cached")
	}
	clock.Advance(time.Second)
	if vd := validate(t, v, pingRequest); vd.Cached || m.calls.Load() != 2 {
		t.Errorf("at the TTL: cached %v after %d calls; want a new call", vd.Cached, m.calls.Load())
	}

	other := pingRequest
	other.Args = map[string]any{"command": "ping -c 2 192.0.2.1"}
	if vd := validate(t, v, other); vd.Cached {
		t.Errorf("different arguments: cached")
	}
}

func TestCacheKeyParts(t *testing.T) {
	policy := writeFile(t, "permissions.md", "Emails to acme.com are fine.\n")
	m := answering(allowJSON)
	v := newValidator(t, m, validator.Config{Mode: portcullis.ValidateContextual, PolicyDocument: policy, CacheTTL: time.Hour})
	base := contextualRequest(2)
	validate(t, v, base)
	if vd := validate(t, v, contextualRequest(2)); !vd.Cached {
		t.Fatalf("identical contextual request: not cached")
	}
	for name, change := range map[string]func(*portcullis.ValidationRequest){
		"conversation": func(r *portcullis.ValidationRequest) {
			r.Conversation = append(r.Conversation, portcullis.Message{Role: "user", Content: "also cc bob"})
		},
		"message edited": func(r *portcullis.ValidationRequest) { r.Conversation[0].Content = "edited" },
		"trigger":        func(r *portcullis.ValidationRequest) { r.Trigger = "other" },
		"presence":       func(r *portcullis.ValidationRequest) { r.UserPresent = false },
		"policy write":   func(r *portcullis.ValidationRequest) { r.PolicyWrite = true },
		"summary":        func(r *portcullis.ValidationRequest) { r.Summary = "send to bob" },
		"tool":           func(r *portcullis.ValidationRequest) { r.Tool = "send_email2" },
		"mode":           func(r *portcullis.ValidationRequest) { r.Mode = portcullis.ValidateStateless },
	} {
		req := contextualRequest(2)
		change(&req)
		if vd := validate(t, v, req); vd.Cached {
			t.Errorf("contextual request with a changed %s: cached", name)
		}
	}

	// In the stateless mode the conversation is not part of the key.
	sv := newValidator(t, answering(allowJSON), validator.Config{CacheTTL: time.Hour})
	validate(t, sv, contextualRequest(2))
	if vd := validate(t, sv, contextualRequest(5)); !vd.Cached {
		t.Errorf("stateless request with another conversation: not cached")
	}

	// The policy hash is part of the key.
	rules := writeFile(t, "rules.md", groundRules)
	shared := answering(allowJSON)
	a := newValidator(t, shared, validator.Config{RulesFile: rules, PolicyHash: "a", CacheTTL: time.Hour})
	validate(t, a, pingRequest)
	b := newValidator(t, shared, validator.Config{RulesFile: rules, PolicyHash: "b", CacheTTL: time.Hour})
	if vd := validate(t, b, pingRequest); vd.Cached {
		t.Errorf("another policy hash: cached")
	}
}

func TestFailClosedNotCached(t *testing.T) {
	fail := true
	var mu sync.Mutex
	m := &fakeModel{ask: func(context.Context, portcullis.ModelPrompt) (portcullis.ModelAnswer, error) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return portcullis.ModelAnswer{Text: "ALLOW: looks fine"}, nil
		}
		return portcullis.ModelAnswer{Text: allowJSON}, nil
	}}
	v := newValidator(t, m, validator.Config{CacheTTL: time.Hour})
	if vd := validate(t, v, pingRequest); !vd.FailClosed {
		t.Fatalf("prose answer: %+v; want fail-closed", vd)
	}
	if vd := validate(t, v, pingRequest); vd.Cached || !vd.FailClosed || m.calls.Load() != 2 {
		t.Errorf("second prose answer: cached %v after %d calls; want a new call", vd.Cached, m.calls.Load())
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	if vd := validate(t, v, pingRequest); vd.Cached || !vd.Allow {
		t.Errorf("after the model recovered: %+v; want a fresh allow", vd)
	}

	errModel := &fakeModel{ask: func(context.Context, portcullis.ModelPrompt) (portcullis.ModelAnswer, error) {
		return portcullis.ModelAnswer{}, errors.New("down")
	}}
	ev := newValidator(t, errModel, validator.Config{CacheTTL: time.Hour})
	validate(t, ev, pingRequest)
	validate(t, ev, pingRequest)
	if errModel.calls.Load() != 2 {
		t.Errorf("errors were cached: %d calls; want 2", errModel.calls.Load())
	}
}

func TestConcurrentIdenticalShareOneCall(t *testing.T) {
	for _, ttl := range []time.Duration{time.Hour, -1} {
		release := make(chan struct{})
		m := &fakeModel{ask: func(ctx context.Context, _ portcullis.ModelPrompt) (portcullis.ModelAnswer, error) {
			<-release
			return portcullis.ModelAnswer{Text: allowJSON}, nil
		}}
		v := newValidator(t, m, validator.Config{CacheTTL: ttl})
		const n = 16
		var wg sync.WaitGroup
		verdicts := make([]portcullis.Verdict, n)
		for i := range n {
			wg.Go(func() {
				vd, err := v.Validate(context.Background(), pingRequest)
				if err != nil {
					t.Errorf("Validate: %v", err)
				}
				verdicts[i] = vd
			})
		}
		// Wait until the call is under way, then let the others pile on.
		for m.calls.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
		close(release)
		wg.Wait()
		if m.calls.Load() != 1 {
			t.Errorf("TTL %v: %d identical concurrent validations made %d model calls; want 1", ttl, n, m.calls.Load())
		}
		for i, vd := range verdicts {
			if !vd.Allow {
				t.Errorf("TTL %v: verdict %d = %+v; want allow", ttl, i, vd)
			}
		}
	}
}

func TestSharedCallOutlivesOneCaller(t *testing.T) {
	release := make(chan struct{})
	m := &fakeModel{ask: func(ctx context.Context, _ portcullis.ModelPrompt) (portcullis.ModelAnswer, error) {
		select {
		case <-release:
			return portcullis.ModelAnswer{Text: allowJSON}, nil
		case <-ctx.Done():
			return portcullis.ModelAnswer{}, ctx.Err()
		}
	}}
	v := newValidator(t, m, validator.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan portcullis.Verdict)
	go func() {
		vd, _ := v.Validate(ctx, pingRequest)
		gone <- vd
	}()
	for m.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	stays := make(chan portcullis.Verdict)
	go func() {
		vd, _ := v.Validate(context.Background(), pingRequest)
		stays <- vd
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if vd := <-gone; vd.Allow || !vd.FailClosed {
		t.Errorf("cancelled caller: %+v; want a fail-closed deny", vd)
	}
	close(release)
	if vd := <-stays; !vd.Allow || m.calls.Load() != 1 {
		t.Errorf("remaining caller: %+v after %d calls; want the shared allow", vd, m.calls.Load())
	}
}
