// Package jsonlines answers a stream of JSON lines: one request a line in,
// one JSON answer a line out, as `portcullis decide` and `portcullis
// classify` read and write them. It knows nothing of what it answers and
// imports only the standard library.
package jsonlines

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Answer reads r a line at a time and writes answer's result for each
// non-blank line to w as one JSON line (HTML characters unescaped). A line
// longer than maxLine bytes, or one answer refuses, ends the run with an
// error naming the line ("line 3: ..."), after the answers before it are
// written; nothing is written for it. An error writing an answer is
// "write <noun>: ...". The answers are flushed whenever no more input is
// waiting, so an interactive caller gets each at once and a batch is
// written in large chunks. Answer stops before the next line once ctx is
// done, and returns nil at the end of r.
func Answer(ctx context.Context, r io.Reader, w io.Writer, maxLine int, noun string, answer func(line []byte) (any, error)) error {
	in := bufio.NewReaderSize(r, 64<<10)
	out := bufio.NewWriter(w)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	fail := func(lineNo int, err error) error {
		if ferr := out.Flush(); ferr != nil {
			return ferr
		}
		return fmt.Errorf("line %d: %w", lineNo, err)
	}
	for lineNo := 1; ; lineNo++ {
		if err := ctx.Err(); err != nil {
			return errors.Join(err, out.Flush())
		}
		line, err := readLine(in, maxLine)
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return out.Flush()
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fail(lineNo, err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		v, err := answer(line)
		if err != nil {
			return fail(lineNo, err)
		}
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("write %s: %w", noun, err)
		}
		if in.Buffered() == 0 {
			if err := out.Flush(); err != nil {
				return fmt.Errorf("write %s: %w", noun, err)
			}
		}
	}
}

// readLine returns the next line without its newline (or "\r\n"), refusing
// lines longer than max bytes.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > max+1 {
			return nil, fmt.Errorf("line longer than the limit of %d bytes", max)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(bytes.TrimSuffix(buf, []byte("\n")), []byte("\r")), err
	}
}
