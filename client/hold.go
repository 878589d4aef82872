package client

import (
	"context"
	"time"

	"github.com/portcullis/portcullis"
)

// Hold holds a call whose decision d needs a person through the gateway
// (GET /v1/decisions/{id}/wait) until a person answers, the request
// expires or ctx ends, and returns the decision that then stands: the
// call decided again by the gateway after an approval, a deny after a
// denial, d itself when ctx ends first (nobody answered in time). An error
// is a gateway that could not be asked. It makes a Client the Holder of
// the hook and the shell gate.
func (c *Client) Hold(ctx context.Context, _ portcullis.Call, d portcullis.Decision) (portcullis.Decision, error) {
	for {
		left := time.Minute
		if dl, ok := ctx.Deadline(); ok {
			left = min(time.Until(dl), left)
		}
		if left < time.Second {
			return d, nil // nobody answered in time
		}
		d2, done, err := c.Poll(ctx, d.DecisionID, left)
		switch {
		case err != nil && ctx.Err() != nil:
			return d, nil
		case err != nil:
			return d, err
		case done:
			return d2, nil
		}
	}
}
