package console

import (
	"context"
	"sync"
	"time"

	"github.com/portcullis/portcullis"
)

// Notices is the console's side of the gate's notifier: it keeps the codes
// of recent danger-zone challenges in memory (the store keeps only their
// salted hashes), so the blocks page can show them to the person, and it
// wakes the console's live pages. A Console makes its own unless one is
// given in Options; make one first when the gate must be built before the
// console:
//
//	notices := console.NewNotices(nil)
//	g, _ := gate.New(pol, gate.WithStore(st), gate.WithNotifier(notify.Multi{terminal, notices}))
//	c, _ := console.New(console.Options{Gate: g, Store: st, Notices: notices, ...})
//
// Codes are forgotten when they expire, when a block is cleared through
// the console, and when the process ends.
type Notices struct {
	clock portcullis.Clock

	mu    sync.Mutex
	codes map[string]knownCode // by challenge ID
	subs  map[chan portcullis.Change]struct{}
}

var _ portcullis.Notifier = (*Notices)(nil)

// knownCode is a challenge's code as the gate handed it to the notifier.
type knownCode struct {
	Agent   string
	Code    string
	Expires time.Time
}

const (
	maxCodes        = 256
	defaultCodeLife = 5 * time.Minute // when a notice names no expiry
	subBuffer       = 16
)

// NewNotices returns an empty Notices; a nil clock is the system clock.
func NewNotices(clock portcullis.Clock) *Notices {
	if clock == nil {
		clock = portcullis.SystemClock{}
	}
	return &Notices{clock: clock, codes: map[string]knownCode{}, subs: map[chan portcullis.Change]struct{}{}}
}

// Notify remembers a block notice's code and wakes the live pages. It
// returns at once and never fails: the gate calls it inside a decision.
func (n *Notices) Notify(_ context.Context, nt portcullis.Notice) error {
	now := n.clock.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	switch nt.Kind {
	case portcullis.NoticeBlock:
		if nt.Code != "" && nt.ChallengeID != "" {
			exp := nt.ExpiresAt
			if exp.IsZero() {
				exp = now.Add(defaultCodeLife)
			}
			n.pruneLocked(now)
			n.codes[nt.ChallengeID] = knownCode{Agent: nt.Agent, Code: nt.Code, Expires: exp}
		}
		n.publishLocked(portcullis.Change{Kind: portcullis.ChangeBlock, ID: nt.Agent})
	case portcullis.NoticeApproval:
		n.publishLocked(portcullis.Change{Kind: portcullis.ChangeApproval, ID: nt.ChallengeID})
	}
	return nil
}

// pruneLocked drops expired codes, then the ones closest to expiry until
// there is room for one more.
func (n *Notices) pruneLocked(now time.Time) {
	for id, k := range n.codes {
		if !now.Before(k.Expires) {
			delete(n.codes, id)
		}
	}
	for len(n.codes) >= maxCodes {
		var first string
		for id, k := range n.codes {
			if first == "" || k.Expires.Before(n.codes[first].Expires) {
				first = id
			}
		}
		delete(n.codes, first)
	}
}

// code returns the code of a challenge when it is known and unexpired;
// expired is set when it was known but has expired.
func (n *Notices) code(challengeID string) (k knownCode, ok, expired bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	k, ok = n.codes[challengeID]
	if ok && !n.clock.Now().Before(k.Expires) {
		return knownCode{}, false, true
	}
	return k, ok, false
}

// forget drops a challenge's code (its block was cleared).
func (n *Notices) forget(challengeID string) {
	n.mu.Lock()
	delete(n.codes, challengeID)
	n.mu.Unlock()
}

// subscribe returns a channel of the changes notices imply, and the
// function that ends the subscription.
func (n *Notices) subscribe() (<-chan portcullis.Change, func()) {
	ch := make(chan portcullis.Change, subBuffer)
	n.mu.Lock()
	n.subs[ch] = struct{}{}
	n.mu.Unlock()
	return ch, func() {
		n.mu.Lock()
		delete(n.subs, ch)
		n.mu.Unlock()
	}
}

// publishLocked sends c to every subscriber without blocking. A subscriber
// whose buffer is full misses it, harmlessly: the changes still queued
// make its page re-read everything it shows.
func (n *Notices) publishLocked(c portcullis.Change) {
	for ch := range n.subs {
		select {
		case ch <- c:
		default:
		}
	}
}
