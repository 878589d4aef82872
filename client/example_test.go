package client_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/client"
)

// An agent asks before it acts, and waits for a person when it must.
func ExampleClient_Decide() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:8080", os.Getenv("PORTCULLIS_AGENT_TOKEN"))
	if err != nil {
		log.Fatal(err)
	}
	d, err := c.Decide(ctx, portcullis.Call{Tool: "delete_element", Args: map[string]any{"name": "notes"}, Session: "s1"})
	if err != nil {
		log.Fatal(err) // no answer is a no
	}
	if d.Outcome == portcullis.OutcomeConfirm {
		// A person is asked out of band; wait for the answer.
		if d, err = c.Wait(ctx, d.DecisionID); err != nil {
			log.Fatal(err)
		}
	}
	if !d.Allowed() {
		fmt.Println("not allowed:", d.Reason)
		return
	}
	// ... run the call ...
}
