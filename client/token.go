package client

import (
	"fmt"
	"os"
	"strings"
)

// ReadToken reads an agent token from a file (as `portcullis serve`
// writes it, 0600 in its state directory): the file's content without
// surrounding space, which must not be empty.
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the agent token: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("the agent token file %s is empty", path)
	}
	return t, nil
}
