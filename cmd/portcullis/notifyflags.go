package main

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/notify"

	"github.com/spf13/pflag"
)

// notifyDrain bounds how long a command waits at its end for notifications
// still being delivered.
const notifyDrain = 5 * time.Second

// notifyFlags are the flags that send notices to human channels besides
// the terminal: a desktop notification and a webhook.
type notifyFlags struct {
	desktop       bool
	webhook       string
	webhookFormat string
	webhookHuman  bool
}

func (f *notifyFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.desktop, "notify-desktop", false, "show blocks and approvals as desktop notifications (notify-send on Linux, osascript on macOS)")
	fs.StringVar(&f.webhook, "notify-webhook", "", "POST each notice as JSON to this `URL`, retried with backoff")
	fs.StringVar(&f.webhookFormat, "notify-webhook-format", notify.FormatJSON, "webhook payload `format`: json (the notice) or slack ({\"text\": ...})")
	fs.BoolVar(&f.webhookHuman, "notify-webhook-human", false, "the webhook is read only by people: send it the verification code of a block")
}

// set reports whether any notification flag was given.
func (f *notifyFlags) set() bool {
	return f.desktop || f.webhook != "" || f.webhookHuman || f.webhookFormat != notify.FormatJSON
}

// notifier builds the notifier the flags ask for: nil when none was asked
// for. The cleanup func waits (at most notifyDrain) for notices still being
// delivered and stops the webhook; it is never nil.
func (f *notifyFlags) notifier(log *slog.Logger) (portcullis.Notifier, func(), error) {
	nothing := func() {}
	if f.webhook == "" && (f.webhookHuman || f.webhookFormat != notify.FormatJSON) {
		return nil, nothing, usageError("--notify-webhook-format and --notify-webhook-human need --notify-webhook URL")
	}
	var (
		multi   notify.Multi
		closers []func(context.Context) error
	)
	if f.desktop {
		d, ok := notify.NewDesktop(notify.DesktopOptions{Logger: log})
		if !ok {
			return nil, nothing, usageError("--notify-desktop: %s", desktopMissing())
		}
		multi = append(multi, d)
		closers = append(closers, d.Close)
	}
	if f.webhook != "" {
		w, err := notify.NewWebhook(notify.WebhookOptions{URL: f.webhook, Format: f.webhookFormat, Human: f.webhookHuman, Logger: log})
		if err != nil {
			return nil, nothing, usageError("--notify-webhook: %v", err)
		}
		multi = append(multi, w)
		closers = append(closers, w.Close)
	}
	cleanup := func() {
		ctx, cancel := context.WithTimeout(context.Background(), notifyDrain)
		defer cancel()
		for _, c := range closers {
			if err := c(ctx); err != nil {
				log.Error("notifications not delivered", "err", err)
			}
		}
	}
	switch len(multi) {
	case 0:
		return nil, nothing, nil
	case 1:
		return multi[0], cleanup, nil
	}
	return multi, cleanup, nil
}

// desktopMissing says which program to install for desktop notifications.
func desktopMissing() string {
	prog := notify.DesktopProgram()
	switch {
	case prog == "":
		return "desktop notifications are not supported on " + runtime.GOOS
	case runtime.GOOS == "linux":
		return fmt.Sprintf("%s is not on PATH (install it: libnotify-bin on Debian and Ubuntu, libnotify on Fedora and Arch)", prog)
	}
	return prog + " is not on PATH"
}
