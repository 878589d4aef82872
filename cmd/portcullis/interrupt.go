package main

import (
	"os"
	"os/signal"
	"syscall"
)

// watchInterrupts delivers the signals that stop serve and mcp, counted
// from the call (cmdutil.Env.Interrupts): main's context ends at the
// first, but the gateway commands look at each one (a second Ctrl-C means
// something else than the first: server.UntilStopped).
func watchInterrupts() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	return ch, func() { signal.Stop(ch) }
}
