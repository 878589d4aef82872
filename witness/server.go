package witness

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Server is a reference HTTP witness: it keeps the heads of any number of
// gateways, each under a name of its own, append-only in Dir/NAME.jsonl.
//
//	POST /heads/NAME   a head as JSON (at most 4 KiB): appended and synced, 204
//	GET  /heads/NAME   every head kept for NAME, one JSON object a line, 200
//
// It never rewrites or deletes a head: a gateway's rewritten chain can only
// add heads, and verification checks every one. With Token set, both
// methods need "Authorization: Bearer TOKEN". Run it on a machine, or as a
// user, that the gateway's host cannot write to.
type Server struct {
	Dir    string
	Token  string
	Logger *slog.Logger

	mu sync.Mutex
}

// ListenAndServe serves s on addr (HOST:PORT) until ctx ends, then shuts
// down, waiting up to 10 seconds for the requests in flight; ready, when
// set, is told the address it listens on first.
func (s *Server) ListenAndServe(ctx context.Context, addr string, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: time.Minute,
	}
	if ready != nil {
		ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shut)
}

// validName reports whether name can be a gateway's name under /heads/:
// 1 to 128 ASCII letters, digits, '.', '_' and '-', starting with a letter
// or a digit. (A check by hand: the regular expression it replaces compiled
// its bounded repetition into 118 KB of program at every start.)
func validName(name string) bool {
	if len(name) == 0 || len(name) > 128 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// ServeHTTP implements the protocol above.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, "/heads/")
	if !ok || !validName(name) {
		http.Error(w, "not found: heads live at /heads/NAME (letters, digits, '.', '_', '-')", http.StatusNotFound)
		return
	}
	if s.Token != "" {
		got, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if subtle.ConstantTimeCompare([]byte(got), []byte(s.Token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="portcullis witness"`)
			http.Error(w, "a bearer token is required", http.StatusUnauthorized)
			return
		}
	}
	path := filepath.Join(s.Dir, name+".jsonl")
	switch r.Method {
	case http.MethodPost:
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxHeadLine))
		if err != nil {
			http.Error(w, "the head is too large or unreadable", http.StatusRequestEntityTooLarge)
			return
		}
		h, err := ParseHead(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		line, err := encodeHead(h)
		if err != nil {
			http.Error(w, "cannot encode the head", http.StatusInternalServerError)
			return
		}
		s.mu.Lock()
		err = appendLine(path, line)
		s.mu.Unlock()
		if err != nil {
			s.logger().Error("witness: cannot keep a head", "name", name, "err", err)
			http.Error(w, "cannot keep the head", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case http.MethodGet:
		// Send the heads whole lines: up to the size the file had when no
		// append was under way (appends only add after it).
		s.mu.Lock()
		f, err := os.Open(path)
		var size int64
		if err == nil {
			var fi os.FileInfo
			if fi, err = f.Stat(); err == nil {
				size = fi.Size()
			} else {
				f.Close()
			}
		}
		s.mu.Unlock()
		if errors.Is(err, os.ErrNotExist) {
			w.Header().Set("Content-Type", "application/x-ndjson")
			return // no heads yet
		}
		if err != nil {
			s.logger().Error("witness: cannot read heads", "name", name, "err", err)
			http.Error(w, "cannot read the heads", http.StatusInternalServerError)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "application/x-ndjson")
		if _, err := io.Copy(w, io.LimitReader(f, size)); err != nil {
			s.logger().Warn("witness: sending heads", "name", name, "err", err)
		}
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "use GET or POST", http.StatusMethodNotAllowed)
	}
}

func (s *Server) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}
