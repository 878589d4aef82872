package remote

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/validator"
	"github.com/portcullis/portcullis/validator/internal/failure"
)

// Open builds the provider cfg names, with the API key ("" when none).
type Open func(cfg Config, key string) (portcullis.Model, error)

// Serve is the provider program's loop: it reads the Config and the API key from in, builds
// the provider with open, says hello on out, then answers every question
// read from in, concurrently, until in ends (nil) or carries a line that is
// not a request (an error). describe, when not nil, fills in an error's
// details only the provider's own error type knows (type, code, request
// id, retry-after); the message, the status, whether a retry may succeed
// and a timeout are carried for any error.
func Serve(in io.Reader, out io.Writer, open Open, describe func(err error, e *Error)) error {
	dec := json.NewDecoder(bufio.NewReader(in))
	w := &lineWriter{enc: json.NewEncoder(out)}
	var st start
	if err := dec.Decode(&st); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return fmt.Errorf("read the configuration: %w", err)
	}
	cfg, key := st.Config, st.APIKey
	if cfg.Protocol != Protocol {
		err := fmt.Errorf("%s speaks protocol %d, the gateway %d: install the same version of both", Program, Protocol, cfg.Protocol)
		w.write(hello{Protocol: Protocol, Error: err.Error()})
		return err
	}
	m, err := open(cfg, key)
	if err != nil {
		msg := failure.Scrub(err.Error(), key)
		w.write(hello{Protocol: Protocol, Error: msg})
		return errors.New(msg)
	}
	if err := w.write(hello{Protocol: Protocol, Name: m.Name()}); err != nil {
		return err
	}

	var (
		mu       sync.Mutex
		inFlight = map[uint64]context.CancelFunc{}
		wg       sync.WaitGroup
	)
	defer wg.Wait()
	// Runs first: the questions still in flight when in ends have nobody
	// to answer.
	ctx, cancelAll := context.WithCancel(context.Background())
	defer cancelAll()
	for {
		var req request
		if err := dec.Decode(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read a request: %w", err)
		}
		if req.Cancel {
			mu.Lock()
			if cancel := inFlight[req.ID]; cancel != nil {
				cancel()
			}
			mu.Unlock()
			continue
		}
		if req.Prompt == nil {
			return fmt.Errorf("request %d has neither a prompt nor a cancel", req.ID)
		}
		qctx, cancel := context.WithCancel(ctx)
		mu.Lock()
		inFlight[req.ID] = cancel
		mu.Unlock()
		wg.Add(1)
		go func(id uint64, p portcullis.ModelPrompt) {
			defer wg.Done()
			a, err := ask(qctx, m, p)
			mu.Lock()
			delete(inFlight, id)
			mu.Unlock()
			cancel()
			res := response{ID: id}
			if err != nil {
				res.Error = describeError(err, key, describe)
			} else {
				res.Answer = toAnswer(a)
			}
			w.write(res) // a gateway that has gone reads nothing
		}(req.ID, req.Prompt.model())
	}
}

// ask calls the model, turning a panic into an error.
func ask(ctx context.Context, m portcullis.Model, p portcullis.ModelPrompt) (a portcullis.ModelAnswer, err error) {
	defer func() {
		if r := recover(); r != nil {
			a, err = portcullis.ModelAnswer{}, fmt.Errorf("%s panicked: %v", m.Name(), r)
		}
	}()
	return m.Ask(ctx, p)
}

func describeError(err error, key string, describe func(error, *Error)) *wireError {
	e := &Error{}
	if describe != nil {
		describe(err, e)
	}
	var hs interface{ HTTPStatus() int }
	if e.StatusCode == 0 && errors.As(err, &hs) {
		e.StatusCode = hs.HTTPStatus()
	}
	w := &wireError{
		Message:    failure.Scrub(err.Error(), key),
		Retryable:  validator.IsRetryable(err),
		StatusCode: e.StatusCode,
		Type:       failure.Scrub(e.Type, key),
		Code:       failure.Scrub(e.Code, key),
		RequestID:  e.RequestID,
		RetryAfter: e.RetryAfter,
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		w.Cause = "deadline"
	case errors.Is(err, context.Canceled):
		w.Cause = "canceled"
	}
	return w
}

// lineWriter writes one JSON value a line, from any goroutine.
type lineWriter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (w *lineWriter) write(v any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.enc.Encode(v)
}
