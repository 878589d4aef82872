// Package witness anchors the audit chain outside the host: it publishes
// the chain's head — sequence number, hash, time and signature — to
// witnesses the host cannot rewrite (an HTTP endpoint the operator runs, a
// file on another mount, a supervisor's standard error), and reads back the
// heads a witness kept so that `portcullis audit verify --witness` can check
// the local chain against every one of them.
//
// It imports the root package and the standard library only. Publishing
// runs beside the gateway, never inside a decision: a witness that is slow
// or down costs a warning and a lag metric, and never blocks or fails a
// call. It does not sign: the caller passes a Sign function (the gateway
// signs with its audit key).
package witness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/portcullis/portcullis"
)

// Head is one published head of the chain: the sequence number and hash of
// its last row, when it was published, and the publisher's signature over
// them. On the wire it is one JSON object:
// {"seq":42,"hash":"sha256:…","time":"2026-11-28T14:00:00Z","signature":"hmac-sha256:…"}.
type Head = portcullis.AuditCheckpoint

// A Witness keeps the heads published to it where the host cannot rewrite
// them.
type Witness interface {
	// Name identifies the witness in logs, metrics and reports (never a
	// secret).
	Name() string
	// Publish hands the witness a head; nil means the witness kept it.
	Publish(ctx context.Context, h Head) error
}

// A Reader is a witness whose heads can be read back, in the order it
// kept them.
type Reader interface {
	Witness
	Heads(ctx context.Context) ([]Head, error)
}

// maxHeadLine bounds one head on the wire and in a file.
const maxHeadLine = 4096

// ParseHead reads one head and checks its form.
func ParseHead(line []byte) (Head, error) {
	var h Head
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return Head{}, fmt.Errorf("not a head: %w", err)
	}
	if dec.More() {
		return Head{}, errors.New("not a head: more than one JSON value")
	}
	switch {
	case h.Seq < 0:
		return Head{}, fmt.Errorf("head: seq %d is negative", h.Seq)
	case !strings.HasPrefix(h.Hash, "sha256:") || len(h.Hash) != len(portcullis.GenesisHash):
		return Head{}, fmt.Errorf("head: hash %q is not sha256:<64 hex digits>", h.Hash)
	case h.Time.IsZero():
		return Head{}, errors.New("head: time is missing")
	}
	return h, nil
}

// readHeads reads heads, one JSON object a line (blank lines skipped; on a
// line a Stream wrote, what follows StreamPrefix).
func readHeads(r io.Reader, from string) ([]Head, error) {
	var out []Head
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, maxHeadLine), maxHeadLine)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if _, after, ok := bytes.Cut(line, []byte(StreamPrefix)); ok {
			line = after // a line a Stream wrote, as a supervisor logged it
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		h, err := ParseHead(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", from, n, err)
		}
		out = append(out, h)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", from, err)
	}
	return out, nil
}

func encodeHead(h Head) ([]byte, error) {
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode head: %w", err)
	}
	return append(b, '\n'), nil
}

// ParseAll makes the witnesses of specs, each as Parse does.
func ParseAll(specs []string, stderr io.Writer) ([]Witness, error) {
	var out []Witness
	for _, s := range specs {
		w, err := Parse(s, stderr)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

// Parse makes a witness of a command-line spec: an http:// or https:// URL
// (an HTTP witness), "stderr" (standard error, given as w), or a file path.
func Parse(spec string, stderr io.Writer) (Witness, error) {
	switch {
	case spec == "":
		return nil, errors.New("witness: empty")
	case spec == "stderr":
		return &Stream{W: stderr, Label: "stderr"}, nil
	case strings.HasPrefix(spec, "http://") || strings.HasPrefix(spec, "https://"):
		if _, err := url.Parse(spec); err != nil {
			return nil, fmt.Errorf("witness %q: %w", spec, err)
		}
		return &HTTP{URL: spec}, nil
	}
	return &File{Path: spec}, nil
}

// HTTP is a witness the operator runs: Publish POSTs the head as JSON to
// URL; Heads GETs URL and reads one head a line. Token, when set, is sent
// as a bearer token. See docs/OPERATIONS.md for the protocol; Server is a
// reference implementation.
type HTTP struct {
	URL    string
	Token  string
	Client *http.Client // default: a client with a 10 s timeout
}

// Name returns the URL without its query or user information.
func (w *HTTP) Name() string {
	u, err := url.Parse(w.URL)
	if err != nil {
		return "http witness"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

var defaultClient = &http.Client{Timeout: 10 * time.Second}

func (w *HTTP) client() *http.Client {
	if w.Client != nil {
		return w.Client
	}
	return defaultClient
}

// Publish POSTs h; any 2xx answer means the witness kept it.
func (w *HTTP) Publish(ctx context.Context, h Head) error {
	body, err := encodeHead(h)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("witness %s: %w", w.Name(), err)
	}
	req.Header.Set("Content-Type", "application/json")
	if w.Token != "" {
		req.Header.Set("Authorization", "Bearer "+w.Token)
	}
	resp, err := w.client().Do(req)
	if err != nil {
		return fmt.Errorf("witness %s: %w", w.Name(), err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512)) // best effort: the status decides
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("witness %s: %s: %s", w.Name(), resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// Heads GETs every head the witness kept.
func (w *HTTP) Heads(ctx context.Context) ([]Head, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("witness %s: %w", w.Name(), err)
	}
	req.Header.Set("Accept", "application/x-ndjson")
	if w.Token != "" {
		req.Header.Set("Authorization", "Bearer "+w.Token)
	}
	resp, err := w.client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("witness %s: %w", w.Name(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512)) // best effort: the status decides
		return nil, fmt.Errorf("witness %s: %s: %s", w.Name(), resp.Status, strings.TrimSpace(string(msg)))
	}
	return readHeads(resp.Body, w.Name())
}

// File is a witness that appends heads, one JSON object a line, to a file
// — on another mount, or one the host can only append to (chattr +a, a
// write-once bucket mounted as a file system).
type File struct {
	Path string

	mu sync.Mutex
}

// Name returns the path.
func (w *File) Name() string { return w.Path }

// Publish appends h and syncs the file.
func (w *File) Publish(ctx context.Context, h Head) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	line, err := encodeHead(h)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return appendLine(w.Path, line)
}

// appendLine appends line to path (created 0600) and syncs it.
func appendLine(path string, line []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("witness %s: %w", path, err)
	}
	if _, err := f.Write(line); err != nil {
		f.Close()
		return fmt.Errorf("witness %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("witness %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("witness %s: %w", path, err)
	}
	return nil
}

// Heads reads every head in the file.
func (w *File) Heads(ctx context.Context) ([]Head, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(w.Path)
	if err != nil {
		return nil, fmt.Errorf("witness %s: %w", w.Path, err)
	}
	defer f.Close()
	return readHeads(f, w.Path)
}

// Stream is a witness that writes each head as a line to W — a
// supervisor's standard error, or anything that ships it off the host —
// prefixed "portcullis audit head: ". It cannot be read back from here:
// give the lines the supervisor kept to `audit verify --witness FILE`
// (what precedes the prefix on a line, a timestamp, is ignored; FILE must
// hold no other lines).
type Stream struct {
	W     io.Writer
	Label string

	mu sync.Mutex
}

// StreamPrefix starts every line a Stream writes.
const StreamPrefix = "portcullis audit head: "

// Name returns the label.
func (w *Stream) Name() string { return w.Label }

// Publish writes h as one line.
func (w *Stream) Publish(ctx context.Context, h Head) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	line, err := encodeHead(h)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := io.WriteString(w.W, StreamPrefix+string(line)); err != nil {
		return fmt.Errorf("witness %s: %w", w.Label, err)
	}
	return nil
}
