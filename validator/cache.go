package validator

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"time"

	"github.com/portcullis/portcullis"
)

// maxCacheEntries bounds the verdict cache; the oldest entry goes first.
const maxCacheEntries = 10000

// key identifies a request for the cache and for sharing a model call.
type key [sha256.Size]byte

// hasher writes length-prefixed fields, so no two field lists collide.
type hasher struct{ h hash.Hash }

func newHash() *hasher { return &hasher{h: sha256.New()} }

func (h *hasher) WriteString(s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.h.Write(n[:])
	h.h.Write([]byte(s))
}

func (h *hasher) WriteBool(b bool) {
	if b {
		h.h.Write([]byte{1})
	} else {
		h.h.Write([]byte{0})
	}
}

func (h *hasher) sum() (k key) {
	h.h.Sum(k[:0])
	return k
}

func (h *hasher) hex() string { k := h.sum(); return hex.EncodeToString(k[:]) }

// cacheKey is the key of a request: everything the prompt depends on, plus
// the policy hash and the model.
func (v *Validator) cacheKey(vw *view, rulesHash [sha256.Size]byte) key {
	h := newHash()
	h.WriteString(v.cfg.PolicyHash)
	h.WriteString(string(rulesHash[:]))
	h.WriteString(v.name)
	h.WriteString(string(vw.mode))
	h.WriteString(vw.tool)
	h.WriteString(string(vw.args))
	h.WriteString(vw.summary)
	h.WriteString(string(vw.risk))
	h.WriteBool(vw.policyWrite)
	if vw.mode == portcullis.ValidateContextual {
		h.WriteString(vw.trigger)
		h.WriteBool(vw.userPresent)
		h.WriteString(string(vw.source))
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(vw.omittedUser))
		h.h.Write(n[:])
		binary.BigEndian.PutUint64(n[:], uint64(vw.omittedOther))
		h.h.Write(n[:])
		for _, m := range vw.convo {
			h.WriteString(m.Role)
			h.WriteString(m.Content)
		}
	}
	return h.sum()
}

type cacheEntry struct {
	verdict portcullis.Verdict
	expires time.Time
	seq     uint64
}

type queued struct {
	k   key
	seq uint64
}

// cache is a bounded map of verdicts with a time to live. Its caller holds
// the lock.
type cache struct {
	entries map[key]cacheEntry
	order   []queued // insertion order; stale items (seq mismatch) are skipped
	head    int
	seq     uint64
}

func (c *cache) get(k key, now time.Time) (portcullis.Verdict, bool) {
	e, ok := c.entries[k]
	if !ok {
		return portcullis.Verdict{}, false
	}
	if !now.Before(e.expires) {
		delete(c.entries, k)
		return portcullis.Verdict{}, false
	}
	return e.verdict, true
}

func (c *cache) put(k key, vd portcullis.Verdict, expires time.Time) {
	if c.entries == nil {
		c.entries = make(map[key]cacheEntry)
	}
	c.seq++
	c.entries[k] = cacheEntry{verdict: vd, expires: expires, seq: c.seq}
	c.order = append(c.order, queued{k: k, seq: c.seq})
	for len(c.entries) > maxCacheEntries && c.head < len(c.order) {
		q := c.order[c.head]
		c.head++
		if e, ok := c.entries[q.k]; ok && e.seq == q.seq {
			delete(c.entries, q.k)
		}
	}
	// Compact the queue once most of it is consumed or stale (re-inserted
	// or expired keys leave stale items behind).
	if pending := len(c.order) - c.head; (c.head > 64 && c.head > len(c.order)/2) || pending > 2*len(c.entries)+64 {
		live := c.order[:0]
		for _, q := range c.order[c.head:] {
			if e, ok := c.entries[q.k]; ok && e.seq == q.seq {
				live = append(live, q)
			}
		}
		c.order, c.head = live, 0
	}
}
