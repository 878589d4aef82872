package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/mcpgw"
)

// refusedBy names, in the audit log, who refused the calls held when the
// gateway was stopped: the person at its terminal.
const refusedBy = "operator (gateway stopped)"

// interrupts are the signals that stop serve and mcp, counted from their
// start: main's context ends at the first, but the gateway commands look
// at each one (a second Ctrl-C means something else than the first).
type interrupts struct {
	ch chan os.Signal
}

func watchInterrupts() *interrupts {
	in := &interrupts{ch: make(chan os.Signal, 4)}
	signal.Notify(in.ch, os.Interrupt, syscall.SIGTERM)
	return in
}

func (in *interrupts) stop() { signal.Stop(in.ch) }

// heldGateway is what untilStopped needs of a gateway: its held calls,
// and the gate that answers their approval requests.
type heldGateway struct {
	gw   *mcpgw.Gateway
	gate *gate.Gate
	// answer says where a person answers a held call (besides the CLI).
	answer func(mcpgw.HeldCall) string
}

// untilStopped returns when a gateway command should stop: when its
// serving ended (true, and what done sent), or when it was stopped. Ended with no call held for a person, it
// returns at once. With held calls, SIGTERM refuses them and returns;
// the first Ctrl-C says on stderr which calls wait and how to answer
// them, and keeps serving: once none waits it returns, and a second
// Ctrl-C refuses them (each agent is told why; each refusal is audited)
// and returns.
func untilStopped(ctx context.Context, in *interrupts, hg heldGateway, done <-chan error, stderr io.Writer) (ended bool, err error) {
	var first os.Signal
	select {
	case err = <-done:
		return true, err
	case first = <-in.ch:
	case <-ctx.Done():
		// main's context ends on the same signal this command receives
		// on its own channel: take that delivery, so it is not counted
		// as a second one. signal.NotifyContext ends its context with a
		// cause that is a kind of context.Canceled but not Canceled
		// itself; a caller's plain cancel is Canceled.
		if cause := context.Cause(ctx); cause != context.Canceled && errors.Is(cause, context.Canceled) {
			select {
			case first = <-in.ch:
			case <-time.After(time.Second):
			}
		}
	}
	held := hg.gw.Held()
	if len(held) == 0 {
		return false, nil
	}
	if first == syscall.SIGTERM {
		refuseHeld(hg, "the gateway was stopped (SIGTERM) before a person answered", stderr)
		return false, nil
	}
	fmt.Fprintf(stderr, "portcullis: stopping, but %s waiting for a person's answer:\n", plural(len(held), "call"))
	for _, h := range held {
		fmt.Fprintf(stderr, "  %s of agent %s (session %s), waiting %s: portcullis approve %s | portcullis deny %s%s\n",
			h.Tool, h.Agent, h.Session, time.Since(h.Since).Round(time.Second), h.ApprovalID, h.ApprovalID, hg.answer(h))
	}
	fmt.Fprintln(stderr, "portcullis: still serving until they are answered; press Ctrl-C again to refuse them and stop now")
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err = <-done:
			return true, err
		case s := <-in.ch:
			refuseHeld(hg, fmt.Sprintf("the gateway was stopped (%s) before a person answered", signalName(s)), stderr)
			return false, nil
		case <-tick.C:
			if len(hg.gw.Held()) == 0 {
				fmt.Fprintln(stderr, "portcullis: no call waits any more; stopping")
				return false, nil
			}
		}
	}
}

// refuseHeld denies the approval request of every held call, so each
// agent is answered with the reason at once, and waits (a second at
// most) until the calls have been answered.
func refuseHeld(hg heldGateway, reason string, stderr io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	held := hg.gw.Held()
	for _, h := range held {
		if _, err := hg.gate.DenyApproval(ctx, h.ApprovalID, refusedBy, reason); err != nil {
			fmt.Fprintf(stderr, "portcullis: refuse the held call %s (%s): %v\n", h.Tool, h.ApprovalID, err)
		}
	}
	fmt.Fprintf(stderr, "portcullis: refused %s: %s\n", plural(len(held), "held call"), reason)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for len(hg.gw.Held()) > 0 {
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
