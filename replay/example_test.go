package replay_test

import (
	"context"
	"fmt"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/policy"
	"github.com/portcullis/portcullis/replay"
)

// A gate records its decisions in a store's audit log; a replay decides
// them again under a stricter policy before it is deployed.
func ExampleReplayer_Run() {
	ctx := context.Background()
	old, _, err := policy.Parse("old.yaml", []byte("version: 1\ntools:\n  send_email: {endpoint: CREATE}\n"))
	if err != nil {
		panic(err)
	}
	st := memstore.New(nil)
	g, err := gate.New(old, gate.WithStore(st))
	if err != nil {
		panic(err)
	}
	if _, err := g.Decide(ctx, portcullis.Call{Tool: "send_email", Session: "s1"}); err != nil {
		panic(err)
	}

	stricter, _, err := policy.Parse("new.yaml", []byte("version: 1\ntools:\n  send_email: {endpoint: CREATE, defaultLevel: DENY}\n"))
	if err != nil {
		panic(err)
	}
	r, err := replay.New(stricter, replay.Options{})
	if err != nil {
		panic(err)
	}
	rep, err := r.Run(ctx, st)
	if err != nil {
		panic(err)
	}
	for _, c := range rep.Changes {
		fmt.Printf("row %d %s: %s (%s)\n", c.Seq, c.Tool, c.Change, c.Kind)
	}
	fmt.Printf("%d replayed, %d would change\n", rep.Summary.Replayed, rep.Summary.Changed)
	// Output:
	// row 1 send_email: confirm CONFIRM_SESSION → deny DENY (stricter)
	// 1 replayed, 1 would change
}
