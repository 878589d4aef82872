//go:build unix

package remote

import (
	"os/exec"
	"syscall"
)

// ownGroup runs cmd in a process group of its own, so that a signal to the
// gateway's group (a Ctrl-C in its terminal) does not end the program under
// questions the gateway is still draining: the gateway ends it by closing
// its input. It returns how to kill the whole group.
func ownGroup(cmd *exec.Cmd) (kill func()) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
}
