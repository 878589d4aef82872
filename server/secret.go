package server

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// SecretFile reads a secret kept in the state directory, creating it with
// 32 random bytes (hex) and mode 0600 when it does not exist.
func SecretFile(dir, name string) (string, error) {
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err == nil {
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", fmt.Errorf("%s is empty", path)
		}
		return v, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	v := hex.EncodeToString(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return SecretFile(dir, name)
		}
		return "", err
	}
	if _, err := f.WriteString(v + "\n"); err != nil {
		f.Close()
		return "", err
	}
	return v, f.Close()
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
			b, err := os.ReadFile(a.TokenFile)
			if errors.Is(err, os.ErrNotExist) {
				// First start: make the agent a token, readable by its
				// owner only.
				var raw [24]byte
				if _, err := rand.Read(raw[:]); err != nil {
					return nil, nil, err
				}
				b = []byte(hex.EncodeToString(raw[:]))
				f, err := os.OpenFile(a.TokenFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
				if err != nil {
					return nil, nil, fmt.Errorf("agent %q: create token file: %w", a.Name, err)
				}
				_, werr := f.Write(append(b, '\n'))
				if cerr := f.Close(); werr == nil {
					werr = cerr
				}
				if werr != nil {
					return nil, nil, fmt.Errorf("agent %q: write token file: %w", a.Name, werr)
				}
				created = append(created, a.Name+": "+a.TokenFile)
			} else if err != nil {
				return nil, nil, fmt.Errorf("agent %q: %w", a.Name, err)
			}
			tok := strings.TrimSpace(string(b))
			if tok == "" {
				return nil, nil, fmt.Errorf("agent %q: token file %s is empty", a.Name, a.TokenFile)
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
