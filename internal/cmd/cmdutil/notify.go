package cmdutil

import (
	"errors"
	"log/slog"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/notify"

	"github.com/spf13/pflag"
)

// NotifyFlags are the flags that send notices to human channels besides
// the terminal: a desktop notification and a webhook.
type NotifyFlags struct {
	Desktop       bool
	Webhook       string
	WebhookFormat string
	WebhookHuman  bool
}

// Register declares the --notify-* flags.
func (f *NotifyFlags) Register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.Desktop, "notify-desktop", false, "show blocks and approvals as desktop notifications (notify-send on Linux, osascript on macOS)")
	fs.StringVar(&f.Webhook, "notify-webhook", "", "POST each notice as JSON to this `URL`, retried with backoff")
	fs.StringVar(&f.WebhookFormat, "notify-webhook-format", notify.FormatJSON, "webhook payload `format`: json (the notice) or slack ({\"text\": ...})")
	fs.BoolVar(&f.WebhookHuman, "notify-webhook-human", false, "the webhook is read only by people: send it the verification code of a block")
}

// Set reports whether any notification flag was given.
func (f *NotifyFlags) Set() bool {
	return f.Desktop || f.Webhook != "" || f.WebhookHuman || f.WebhookFormat != notify.FormatJSON
}

// Notifier builds the notifier the flags ask for (notify.Open): nil when
// none was asked for. The cleanup func waits (at most notify.Drain) for
// notices still being delivered and stops the webhook; it is never nil.
func (f *NotifyFlags) Notifier(log *slog.Logger) (portcullis.Notifier, func(), error) {
	if f.Webhook == "" && (f.WebhookHuman || f.WebhookFormat != notify.FormatJSON) {
		return nil, func() {}, UsageError("--notify-webhook-format and --notify-webhook-human need --notify-webhook URL")
	}
	n, cleanup, err := notify.Open(notify.Channels{Desktop: f.Desktop,
		Webhook: notify.WebhookOptions{URL: f.Webhook, Format: f.WebhookFormat, Human: f.WebhookHuman}}, log)
	if ce := (*notify.ChannelError)(nil); errors.As(err, &ce) {
		return nil, cleanup, UsageError("--notify-%s: %v", ce.Channel, ce.Err)
	}
	return n, cleanup, err
}
