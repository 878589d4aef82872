// Package browsertest starts the headless Chromium the console's browser
// tests drive, with chromedp. It is imported by tests only.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Chromium returns the browser to run: $PORTCULLIS_CHROMIUM, or the first
// Chromium or Chrome on the PATH. Without one, the test is skipped — unless
// PORTCULLIS_TEST_BROWSER=1 (as CI sets it), when it fails.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("PORTCULLIS_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	// `go test ./...` on a machine with only Go skips the browser tests;
	// CI sets PORTCULLIS_TEST_BROWSER=1, installs Chromium, and fails on
	// any skipped test.
	if os.Getenv("PORTCULLIS_TEST_BROWSER") != "1" {
		t.Skip("no Chromium found and PORTCULLIS_TEST_BROWSER is not 1: install Debian's chromium (apt-get install chromium) or set PORTCULLIS_CHROMIUM")
	}
	t.Fatal("PORTCULLIS_TEST_BROWSER=1 but no Chromium found: install Debian's chromium (apt-get install chromium) or set PORTCULLIS_CHROMIUM to a Chrome or Chromium binary")
	return ""
}

// New starts a fresh headless Chromium, with a profile of its own, and
// returns a tab's context, which ends after timeout (none if zero). Any
// script error or Content-Security-Policy violation on the pages it shows
// fails the test. The browser is stopped when the test ends.
func New(t testing.TB, timeout time.Duration) context.Context {
	t.Helper()
	exe := Chromium(t)
	// Not t.TempDir: Chromium's helper processes may still write to their
	// profile for a moment after the browser is gone.
	profile, err := os.MkdirTemp("", "portcullis-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1200, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	cancelTime := context.CancelFunc(func() {})
	if timeout > 0 {
		ctx, cancelTime = context.WithTimeout(ctx, timeout)
	}
	t.Cleanup(func() {
		cancelTime()
		cancelTab()
		cancelAlloc()
		for range 100 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("could not remove the browser profile %s", profile)
	})
	var mu sync.Mutex
	var problems []string
	chromedp.ListenTarget(ctx, func(ev any) {
		var msg string
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg = "script error: " + ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil {
				msg += " " + ev.ExceptionDetails.Exception.Description
			}
		case *cdplog.EventEntryAdded:
			if strings.Contains(ev.Entry.Text, "Content Security Policy") {
				msg = "CSP violation: " + ev.Entry.Text
			}
		}
		if msg != "" {
			mu.Lock()
			problems = append(problems, msg)
			mu.Unlock()
		}
	})
	if err := chromedp.Run(ctx, cdplog.Enable(), runtime.Enable()); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range problems {
			t.Errorf("in the browser: %s", p)
		}
	})
	return ctx
}
