package main

import (
	"os"
	"os/signal"
	"syscall"
)

// interrupts are the signals that stop serve and mcp, counted from their
// start: main's context ends at the first, but the gateway commands look
// at each one (a second Ctrl-C means something else than the first:
// server.UntilStopped).
type interrupts struct {
	ch chan os.Signal
}

func watchInterrupts() *interrupts {
	in := &interrupts{ch: make(chan os.Signal, 4)}
	signal.Notify(in.ch, os.Interrupt, syscall.SIGTERM)
	return in
}

func (in *interrupts) stop() { signal.Stop(in.ch) }
