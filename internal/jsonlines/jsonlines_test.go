package jsonlines_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/portcullis/portcullis/internal/jsonlines"
)

// upper answers each line with itself in capitals, and refuses "bad".
func upper(line []byte) (any, error) {
	if string(line) == "bad" {
		return nil, errors.New("a bad line")
	}
	return map[string]string{"got": strings.ToUpper(string(line))}, nil
}

func TestAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, in, want, wantErr string
	}{
		{"lines", "a\n\n  \nb<&>\r\nc", "{\"got\":\"A\"}\n{\"got\":\"B<&>\"}\n{\"got\":\"C\"}\n", ""},
		{"empty", "", "", ""},
		{"refused line", "a\n\nbad\nc\n", "{\"got\":\"A\"}\n", "line 3: a bad line"},
		{"too long", "a\n" + strings.Repeat("x", 17) + "\nc\n", "{\"got\":\"A\"}\n", "line 2: line longer than the limit of 16 bytes"},
		{"at the limit", strings.Repeat("x", 16) + "\n", "{\"got\":\"" + strings.Repeat("X", 16) + "\"}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := jsonlines.Answer(context.Background(), strings.NewReader(tc.in), &out, 16, "answer", upper)
			if got := errString(err); got != tc.wantErr {
				t.Errorf("Answer(%q) = %q; want %q", tc.in, got, tc.wantErr)
			}
			if out.String() != tc.want {
				t.Errorf("Answer(%q) wrote %q; want %q", tc.in, out.String(), tc.want)
			}
		})
	}
}

func TestAnswerStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	err := jsonlines.Answer(ctx, strings.NewReader("a\nb\n"), &out, 16, "answer", func(line []byte) (any, error) {
		cancel() // after the first line
		return upper(line)
	})
	if !errors.Is(err, context.Canceled) || out.String() != "{\"got\":\"A\"}\n" {
		t.Errorf("Answer cancelled after a line = %v, wrote %q; want context.Canceled after the first answer", err, out.String())
	}
}

type brokenWriter struct{}

func (brokenWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestAnswerWriteError(t *testing.T) {
	err := jsonlines.Answer(context.Background(), strings.NewReader("a\n"), brokenWriter{}, 16, "answer", upper)
	if got, want := errString(err), "write answer: disk full"; got != want {
		t.Errorf("Answer to a broken writer = %q; want %q", got, want)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
