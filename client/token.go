package client

import (
	"fmt"

	"github.com/portcullis/portcullis/internal/secret"
)

// ReadToken reads an agent token from a file (as `portcullis serve`
// writes it, 0600 in its state directory): the file's content without
// surrounding space, which must not be empty.
func ReadToken(path string) (string, error) {
	t, err := secret.ReadToken(path)
	if err != nil {
		return "", fmt.Errorf("read the agent token: %w", err)
	}
	return t, nil
}
