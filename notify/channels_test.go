package notify_test

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/portcullis/portcullis/notify"
)

func TestOpen(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	n, closeAll, err := notify.Open(notify.Channels{}, log)
	if n != nil || closeAll == nil || err != nil {
		t.Fatalf("Open(no channels) = %v, %v; want nil and a close function", n, err)
	}
	closeAll()

	_, closeAll, err = notify.Open(notify.Channels{Webhook: notify.WebhookOptions{URL: "ftp://x/"}}, log)
	var ce *notify.ChannelError
	if !errors.As(err, &ce) || ce.Channel != "webhook" || closeAll == nil {
		t.Fatalf("Open(ftp webhook) = %v; want a ChannelError of the webhook", err)
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	n, closeAll, err = notify.Open(notify.Channels{Webhook: notify.WebhookOptions{URL: srv.URL, Format: notify.FormatSlack}}, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := n.(*notify.Webhook); !ok {
		t.Errorf("Open(one webhook) = %T; want the webhook itself", n)
	}
	closeAll()
}

func TestOpenDesktopMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, _, err := notify.Open(notify.Channels{Desktop: true}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var ce *notify.ChannelError
	if !errors.As(err, &ce) || ce.Channel != "desktop" || ce.Err.Error() != notify.DesktopMissing() {
		t.Fatalf("Open(desktop, no program) = %v; want a ChannelError saying %q", err, notify.DesktopMissing())
	}
	if runtime.GOOS == "linux" && !strings.Contains(notify.DesktopMissing(), "libnotify-bin") {
		t.Errorf("DesktopMissing() = %q; want the package to install", notify.DesktopMissing())
	}
}
