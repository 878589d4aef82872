package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/internal/guard"
)

// Error codes of the HTTP layer, beside the root package's (INVALID_REQUEST,
// NOT_FOUND, CONFLICT, VERIFICATION_FAILED, RATE_LIMITED).
const (
	codeUnauthorized     portcullis.Code = "UNAUTHORIZED"           // 401: no token, or a wrong one
	codeForbidden        portcullis.Code = "FORBIDDEN"              // 403: the token may not call this; a foreign Host or Origin
	codeTooLarge         portcullis.Code = "PAYLOAD_TOO_LARGE"      // 413
	codeUnsupportedMedia portcullis.Code = "UNSUPPORTED_MEDIA_TYPE" // 415: a body that is not application/json
	codeMethodNotAllowed portcullis.Code = "METHOD_NOT_ALLOWED"     // 405
	codeInternal         portcullis.Code = "INTERNAL"               // 500: the detail is in the gateway's log
	codeUnavailable      portcullis.Code = "UNAVAILABLE"            // 503
)

// errorBody is every error's JSON: {"error": {"code": ..., "message": ...}}.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    portcullis.Code `json:"code"`
	Message string          `json:"message"`
}

// writeJSON writes v as the response. A failed write means the client went
// away; there is no one left to tell.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"INTERNAL","message":"the response could not be encoded"}}`)
	}
	b = append(b, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	if _, err := w.Write(b); err != nil {
		return
	}
}

func writeError(w http.ResponseWriter, status int, code portcullis.Code, msg string) {
	writeJSON(w, status, errorBody{errorDetail{Code: code, Message: msg}})
}

// fail answers with the error's code and status. A coded error's message is
// meant for users and is shown; anything else is logged and shown as a
// short message.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	var pe *portcullis.Error
	if errors.As(err, &pe) {
		status := http.StatusInternalServerError
		switch pe.Code {
		case portcullis.CodeInvalidRequest, portcullis.CodeVerificationFailed:
			status = http.StatusBadRequest
		case portcullis.CodeNotFound:
			status = http.StatusNotFound
		case portcullis.CodeConflict:
			status = http.StatusConflict
		case portcullis.CodeRateLimited:
			status = http.StatusTooManyRequests
		}
		if status != http.StatusInternalServerError {
			writeError(w, status, pe.Code, pe.Message)
			return
		}
	}
	if r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		// The client went away; nothing to answer.
		return
	}
	a.log.Error("httpapi: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	writeError(w, http.StatusInternalServerError, codeInternal, "internal error; the gateway's log has the detail")
}

// maxSmallBody bounds the bodies of every request but a decision's.
const maxSmallBody = 64 << 10

// readBody reads a JSON request body of at most limit bytes. On failure it
// has written the answer (413, 415 or 400) and marked the connection to be
// closed: the rest of a body it refused is never read.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			guard.CloseAfter(w)
			writeError(w, http.StatusUnsupportedMediaType, codeUnsupportedMedia, "Content-Type "+strconv.Quote(ct)+" is not accepted: send application/json")
			return nil, false
		}
	}
	tooLarge := func() {
		guard.CloseAfter(w)
		writeError(w, http.StatusRequestEntityTooLarge, codeTooLarge, fmt.Sprintf("the request body is larger than the limit of %d bytes", limit))
	}
	if r.ContentLength > limit {
		tooLarge()
		return nil, false
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			tooLarge()
			return nil, false
		}
		guard.CloseAfter(w)
		writeError(w, http.StatusBadRequest, portcullis.CodeInvalidRequest, "the request body could not be read")
		return nil, false
	}
	return b, true
}

// decodeBody reads a small JSON object into v strictly: unknown fields and
// trailing data are errors. An empty body leaves v as it is.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	b, ok := readBody(w, r, maxSmallBody)
	if !ok {
		return false
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return true
	}
	if err := decodeStrict(b, v); err != nil {
		writeError(w, http.StatusBadRequest, portcullis.CodeInvalidRequest, err.Error())
		return false
	}
	return true
}

func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return fmt.Errorf("malformed JSON at byte %d: %v", syn.Offset, err)
		case errors.As(err, &typ) && typ.Field != "":
			return fmt.Errorf("field %q: got JSON %s, want %s", typ.Field, typ.Value, typ.Type)
		case errors.As(err, &typ):
			return fmt.Errorf("got JSON %s, want an object", typ.Value)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return errors.New("truncated JSON")
		}
		return fmt.Errorf("invalid request body: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the request object")
	}
	return nil
}
