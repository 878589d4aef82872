package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/portcullis/portcullis"
)

// Drain bounds how long the close function of Open waits for notices
// still being delivered.
const Drain = 5 * time.Second

// Channels name the human channels besides the terminal that a command or
// a gateway sends notices to.
type Channels struct {
	Desktop bool           // desktop notifications
	Webhook WebhookOptions // a webhook, when its URL is set
}

// ChannelError is a channel that cannot be opened: Channel is "desktop"
// or "webhook".
type ChannelError struct {
	Channel string
	Err     error
}

func (e *ChannelError) Error() string { return e.Channel + ": " + e.Err.Error() }
func (e *ChannelError) Unwrap() error { return e.Err }

// Open opens the channels c names, logging their failures on log: nil
// when it names none, the one channel, or a Multi of both. The close
// function waits (at most Drain) for notices still being delivered and
// stops the webhook, logging what could not be delivered; it is never nil.
// A channel that cannot be opened is a *ChannelError.
func Open(c Channels, log *slog.Logger) (portcullis.Notifier, func(), error) {
	nothing := func() {}
	var (
		multi   Multi
		closers []func(context.Context) error
	)
	if c.Desktop {
		d, ok := NewDesktop(DesktopOptions{Logger: log})
		if !ok {
			return nil, nothing, &ChannelError{Channel: "desktop", Err: errors.New(DesktopMissing())}
		}
		multi = append(multi, d)
		closers = append(closers, d.Close)
	}
	if c.Webhook.URL != "" {
		o := c.Webhook
		o.Logger = log
		w, err := NewWebhook(o)
		if err != nil {
			return nil, nothing, &ChannelError{Channel: "webhook", Err: err}
		}
		multi = append(multi, w)
		closers = append(closers, w.Close)
	}
	closeAll := func() {
		ctx, cancel := context.WithTimeout(context.Background(), Drain)
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
		return multi[0], closeAll, nil
	}
	return multi, closeAll, nil
}

// DesktopMissing says which program to install for desktop notifications.
func DesktopMissing() string {
	prog := DesktopProgram()
	switch {
	case prog == "":
		return "desktop notifications are not supported on " + runtime.GOOS
	case runtime.GOOS == "linux":
		return fmt.Sprintf("%s is not on PATH (install it: libnotify-bin on Debian and Ubuntu, libnotify on Fedora and Arch)", prog)
	}
	return prog + " is not on PATH"
}
