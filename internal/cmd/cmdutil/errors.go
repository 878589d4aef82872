package cmdutil

import "fmt"

// ExitError ends a command with an exit status; its message, when not
// empty, is printed (cmd/portcullis maps it to the process's status).
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string { return e.Msg }

// Exit is an ExitError with this status and message.
func Exit(code int, msg string) error { return &ExitError{Code: code, Msg: msg} }

// UsageError is a command-line mistake: exit status 2.
func UsageError(format string, args ...any) error {
	return &ExitError{Code: 2, Msg: fmt.Sprintf(format, args...)}
}
