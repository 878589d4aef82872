package main

import (
	"errors"
	"log/slog"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/notify"

	"github.com/spf13/pflag"
)

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

// notifier builds the notifier the flags ask for (notify.Open): nil when
// none was asked for. The cleanup func waits (at most notify.Drain) for
// notices still being delivered and stops the webhook; it is never nil.
func (f *notifyFlags) notifier(log *slog.Logger) (portcullis.Notifier, func(), error) {
	if f.webhook == "" && (f.webhookHuman || f.webhookFormat != notify.FormatJSON) {
		return nil, func() {}, usageError("--notify-webhook-format and --notify-webhook-human need --notify-webhook URL")
	}
	n, cleanup, err := notify.Open(notify.Channels{Desktop: f.desktop,
		Webhook: notify.WebhookOptions{URL: f.webhook, Format: f.webhookFormat, Human: f.webhookHuman}}, log)
	if ce := (*notify.ChannelError)(nil); errors.As(err, &ce) {
		return nil, cleanup, usageError("--notify-%s: %v", ce.Channel, ce.Err)
	}
	return n, cleanup, err
}
