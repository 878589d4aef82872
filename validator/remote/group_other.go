//go:build !unix

package remote

import "os/exec"

// ownGroup returns how to kill the program: process groups are a unix
// notion.
func ownGroup(cmd *exec.Cmd) (kill func()) {
	return func() {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
	}
}
