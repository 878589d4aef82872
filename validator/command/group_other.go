//go:build !unix

package command

import "os/exec"

// ownGroup kills only the program itself on cancellation: process groups
// are a unix notion.
func ownGroup(cmd *exec.Cmd) {
	cmd.Cancel = func() error { return cmd.Process.Kill() }
}
