package validator

// Retryable marks err as retryable: a transport error, an HTTP 429 or a 5xx
// that a second attempt may not meet. Validate retries such errors at most
// Config.Retries times, within Config.Timeout. Retryable(nil) is nil.
//
// Providers that must not import this package can instead give their own
// error type the method
//
//	Retryable() bool
//
// returning true; IsRetryable honours it anywhere in the error's chain.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &retryableError{err: err}
}

type retryableError struct{ err error }

func (e *retryableError) Error() string   { return e.err.Error() }
func (e *retryableError) Unwrap() error   { return e.err }
func (e *retryableError) Retryable() bool { return true }

// IsRetryable reports whether err, or an error it wraps, has a method
// Retryable() bool that returns true (as errors made by Retryable do).
func IsRetryable(err error) bool {
	for err != nil {
		if r, ok := err.(interface{ Retryable() bool }); ok && r.Retryable() {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if IsRetryable(e) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}
