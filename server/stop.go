package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/internal/english"
	"github.com/portcullis/portcullis/mcpgw"
)

// RefusedBy names, in the audit log, who refused the calls held when the
// gateway was stopped: the person at its terminal.
const RefusedBy = "operator (gateway stopped)"

// Held is what UntilStopped needs of a gateway: its held calls, and the
// gate that answers their approval requests.
type Held struct {
	Gateway *mcpgw.Gateway
	Gate    *gate.Gate
	// Answer says where a person answers a held call besides the CLI
	// (" | URL" of the console page); nil says nothing more.
	Answer func(mcpgw.HeldCall) string
	// Stderr is the terminal of the person who stops the gateway.
	Stderr io.Writer
}

// UntilStopped returns when a gateway command should stop: when its
// serving ended (true, and what done sent), or when it was stopped by a
// signal on signals (which the caller reads from the process: os.Interrupt
// and SIGTERM). Ended with no call held for a person, it returns at once.
// With held calls, SIGTERM refuses them and returns; the first Ctrl-C says
// on Stderr which calls wait and how to answer them, and keeps serving:
// once none waits it returns, and a second Ctrl-C refuses them (each agent
// is told why; each refusal is audited) and returns.
//
// ctx is the process's: when it ends on the same signal (as
// signal.NotifyContext ends it), that delivery on signals is taken as the
// first one, not counted as a second.
func UntilStopped(ctx context.Context, signals <-chan os.Signal, h Held, done <-chan error) (ended bool, err error) {
	stderr := h.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	var first os.Signal
	select {
	case err = <-done:
		return true, err
	case first = <-signals:
	case <-ctx.Done():
		// signal.NotifyContext ends its context with a cause that is a
		// kind of context.Canceled but not Canceled itself; a caller's
		// plain cancel is Canceled.
		if cause := context.Cause(ctx); cause != context.Canceled && errors.Is(cause, context.Canceled) {
			select {
			case first = <-signals:
			case <-time.After(time.Second):
			}
		}
	}
	held := h.Gateway.Held()
	if len(held) == 0 {
		return false, nil
	}
	if first == syscall.SIGTERM {
		h.refuse("the gateway was stopped (SIGTERM) before a person answered", stderr)
		return false, nil
	}
	fmt.Fprintf(stderr, "portcullis: stopping, but %s waiting for a person's answer:\n", english.Count(len(held), "call"))
	for _, c := range held {
		where := ""
		if h.Answer != nil {
			where = h.Answer(c)
		}
		fmt.Fprintf(stderr, "  %s of agent %s (session %s), waiting %s: portcullis approve %s | portcullis deny %s%s\n",
			c.Tool, c.Agent, c.Session, time.Since(c.Since).Round(time.Second), c.ApprovalID, c.ApprovalID, where)
	}
	fmt.Fprintln(stderr, "portcullis: still serving until they are answered; press Ctrl-C again to refuse them and stop now")
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err = <-done:
			return true, err
		case s := <-signals:
			h.refuse(fmt.Sprintf("the gateway was stopped (%s) before a person answered", signalName(s)), stderr)
			return false, nil
		case <-tick.C:
			if len(h.Gateway.Held()) == 0 {
				fmt.Fprintln(stderr, "portcullis: no call waits any more; stopping")
				return false, nil
			}
		}
	}
}

// refuse denies the approval request of every held call, so each agent
// is answered with the reason at once, and waits (a second at most) until
// the calls have been answered.
func (h Held) refuse(reason string, stderr io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	held := h.Gateway.Held()
	for _, c := range held {
		if _, err := h.Gate.DenyApproval(ctx, c.ApprovalID, RefusedBy, reason); err != nil {
			fmt.Fprintf(stderr, "portcullis: refuse the held call %s (%s): %v\n", c.Tool, c.ApprovalID, err)
		}
	}
	fmt.Fprintf(stderr, "portcullis: refused %s: %s\n", english.Count(len(held), "held call"), reason)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for len(h.Gateway.Held()) > 0 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func signalName(s os.Signal) string {
	if s == os.Interrupt {
		return "Ctrl-C"
	}
	return s.String()
}
