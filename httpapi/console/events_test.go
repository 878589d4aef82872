package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/portcullis/portcullis"
)

type sse struct {
	event, data string
}

// stream opens the event stream and delivers its events until it ends
// (then the channel is closed).
func (c *client) stream(ctx context.Context) <-chan sse {
	c.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.e.srv.URL+"/events", nil)
	must(c.t, err)
	req.Header.Set(sessionHeader, c.session)
	resp, err := c.hc.Do(req)
	must(c.t, err)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		c.t.Fatalf("GET /events = %d %q; want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ch := make(chan sse, 64)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var ev sse
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			case line == "" && ev.event != "":
				ch <- ev
				ev = sse{}
			}
		}
	}()
	return ch
}

// next returns the next event for which match is true, failing if the
// stream ends first (or nothing comes for a long while).
func next(t *testing.T, ch <-chan sse, what string, match func(sse) bool) sse {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the stream ended before %s", what)
			}
			if match(ev) {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %s arrived", what)
		}
	}
}

func isChange(kind portcullis.ChangeKind) func(sse) bool {
	return func(ev sse) bool {
		if ev.event != "change" {
			return false
		}
		var c portcullis.Change
		return json.Unmarshal([]byte(ev.data), &c) == nil && c.Kind == kind
	}
}

func TestEventStream(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	c.login("")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := c.stream(ctx)
	if ev := next(t, ch, "the first pending count", func(ev sse) bool { return ev.event == "pending" }); ev.data != "0" {
		t.Fatalf("first pending count = %q; want 0", ev.data)
	}
	id := e.confirm(deleteCall)
	ev := next(t, ch, "the approval's change", isChange(portcullis.ChangeApproval))
	if !strings.Contains(ev.data, id) {
		t.Errorf("change %s does not name approval %s", ev.data, id)
	}
	next(t, ch, "a pending count of 1", func(ev sse) bool { return ev.event == "pending" && ev.data == "1" })

	if _, err := e.g.BlockAgent(ctx, "deploy-bot", "stop", ""); err != nil {
		t.Fatal(err)
	}
	ev = next(t, ch, "the block's change", isChange(portcullis.ChangeBlock))
	code := e.heard.Last(t, portcullis.NoticeBlock).Code
	if strings.Contains(ev.data, code) {
		t.Fatalf("the event stream carries the code: %s", ev.data)
	}

	// Logging out ends the stream.
	if resp, _ := c.post("/logout", url.Values{"csrf": {c.csrf()}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatal("logout failed")
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return
			}
			if strings.Contains(ev.data, code) {
				t.Fatalf("the event stream carries the code: %s", ev.data)
			}
		case <-deadline:
			t.Fatal("the stream outlived the session")
		}
	}
}

func TestCloseEndsStreams(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	c.login("")
	ch := c.stream(context.Background())
	next(t, ch, "the first pending count", func(ev sse) bool { return ev.event == "pending" })
	must(t, e.c.Close())
	deadline := time.After(20 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("Close did not end the stream")
		}
	}
}
