package witness_test

import (
	"encoding/json"
	"testing"

	"github.com/portcullis/portcullis/witness"
)

// FuzzParseHead feeds the reference witness's parser what anyone who can
// reach it may POST: it never panics, and what it accepts encodes back to
// a head it accepts unchanged.
func FuzzParseHead(f *testing.F) {
	f.Add([]byte(`{"seq":3,"hash":"sha256:0000000000000000000000000000000000000000000000000000000000000000","time":"2026-11-28T14:00:00Z","signature":"hmac-sha256:ab"}`))
	f.Add([]byte(`{"seq":-1}`))
	f.Add([]byte(`{"seq":1,"hash":"sha256:x","time":"2026-11-28T14:00:00Z"}{}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := witness.ParseHead(b)
		if err != nil {
			return
		}
		again, err := json.Marshal(h)
		if err != nil {
			t.Fatalf("encode an accepted head %+v: %v", h, err)
		}
		h2, err := witness.ParseHead(again)
		if err != nil || !h2.Time.Equal(h.Time) || h2.Seq != h.Seq || h2.Hash != h.Hash || h2.Signature != h.Signature {
			t.Fatalf("ParseHead(%s) = %+v, %v; want %+v", again, h2, err, h)
		}
	})
}
