package server

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/portcullis/portcullis/internal/secret"
)

// secretIn reads the secret name kept in the state directory dir,
// creating it on first start.
func secretIn(dir, name string) (string, error) {
	v, _, err := secret.ReadOrCreate(filepath.Join(dir, name))
	return v, err
}

// agentTokens maps the SHA-256 of each agent's token to the agent. A
// token file that does not exist is created (0600) and its path listed in
// created.
func agentTokens(agents []Agent) (byHash map[string]Agent, created []string, err error) {
	out := map[string]Agent{}
	for _, a := range agents {
		var sum string
		switch {
		case a.TokenSHA256 != "":
			b, err := hex.DecodeString(a.TokenSHA256)
			if err != nil || len(b) != sha256.Size {
				return nil, nil, fmt.Errorf("agent %q: tokenSHA256 is not a SHA-256 in hex", a.Name)
			}
			sum = strings.ToLower(a.TokenSHA256)
		case a.TokenFile != "":
			// First start: the agent's token is made, readable by its
			// owner only.
			tok, made, err := secret.ReadOrCreate(a.TokenFile)
			if err != nil {
				return nil, nil, fmt.Errorf("agent %q: token file: %w", a.Name, err)
			}
			if made {
				created = append(created, a.Name+": "+a.TokenFile)
			}
			sum = TokenHash(tok)
		default:
			v := strings.TrimSpace(os.Getenv(a.TokenEnv))
			if v == "" {
				return nil, nil, fmt.Errorf("agent %q: $%s is empty", a.Name, a.TokenEnv)
			}
			sum = TokenHash(v)
		}
		if prev, dup := out[sum]; dup {
			return nil, nil, fmt.Errorf("agents %q and %q have the same token", prev.Name, a.Name)
		}
		out[sum] = a
	}
	return out, created, nil
}

// TokenHash is the SHA-256 of a token in hex, as tokenSHA256 gives it.
func TokenHash(tok string) string {
	s := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(s[:])
}
