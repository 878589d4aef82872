package hook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/portcullis/portcullis"
)

// TranscriptFormat says how a host writes its transcript.
type TranscriptFormat int

const (
	// TranscriptJSONLines is one JSON object per line, appended as the
	// session goes: Claude Code ({"type": "user", "message": {"role",
	// "content"}}) and Codex ({"type": "event_msg", "payload": {"type":
	// "user_message", "message"}}) are both read.
	TranscriptJSONLines TranscriptFormat = iota
	// TranscriptGeminiJSON is one JSON object with a "messages" array of
	// {"type": "user"|"gemini", "content"}.
	TranscriptGeminiJSON
)

// TranscriptBounds bound what is read of a transcript.
type TranscriptBounds struct {
	// TailBytes is how much of the end of a JSON-lines file is read; a
	// whole-file JSON transcript larger than this is not read at all.
	TailBytes int64
	// Messages and Bytes bound the messages kept, newest first.
	Messages int
	Bytes    int
	// MessageBytes bounds one message's content (its start is kept).
	MessageBytes int
}

// DefaultTranscriptBounds keep more than the validator shows (its newest
// 20 messages, 16 KiB), so its own window decides.
var DefaultTranscriptBounds = TranscriptBounds{TailBytes: 1 << 20, Messages: 40, Bytes: 64 << 10, MessageBytes: 8 << 10}

// ReadTranscript returns the newest messages of a host's transcript within
// the bounds, oldest first. It reads the file from its end, newest message
// first, and stops at a bound, so a long session costs no more than a short
// one. Roles are what the validator needs to trust: "user" only for what a
// person typed; tool results are "tool"; injected context (Claude Code's
// meta messages and compaction summaries, sub-agent turns) is left out.
func ReadTranscript(path string, f TranscriptFormat, b TranscriptBounds) ([]portcullis.Message, error) {
	// A FIFO or a device would block or never end: regular files only,
	// checked before opening (opening a FIFO blocks).
	if st, err := os.Stat(path); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	size := st.Size()
	if f == TranscriptGeminiJSON {
		if size > b.TailBytes {
			return nil, fmt.Errorf("%s is %d bytes, more than the %d read of a JSON transcript", path, size, b.TailBytes)
		}
		data, err := io.ReadAll(io.LimitReader(file, b.TailBytes))
		if err != nil {
			return nil, err
		}
		return geminiMessages(data, b)
	}
	off := max(size-b.TailBytes, 0)
	data := make([]byte, size-off)
	if _, err := file.ReadAt(data, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if off > 0 {
		// The first line is cut: start after it.
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		} else {
			data = nil
		}
	}
	var kept keeper
	kept.b = b
	for len(data) > 0 && !kept.full() {
		line := data
		if i := bytes.LastIndexByte(bytes.TrimRight(data, "\n"), '\n'); i >= 0 {
			line, data = data[i+1:], data[:i+1]
		} else {
			data = nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		msgs := lineMessages(line)
		for i := len(msgs) - 1; i >= 0 && !kept.full(); i-- {
			kept.add(msgs[i])
		}
	}
	return kept.oldestFirst(), nil
}

// keeper collects messages newest first within the bounds.
type keeper struct {
	b     TranscriptBounds
	msgs  []portcullis.Message
	bytes int
	stop  bool
}

func (k *keeper) full() bool { return k.stop || len(k.msgs) >= k.b.Messages }

func (k *keeper) add(m portcullis.Message) {
	if strings.TrimSpace(m.Content) == "" {
		return
	}
	if len(m.Content) > k.b.MessageBytes {
		m.Content = cutUTF8(m.Content, k.b.MessageBytes) + "…"
	}
	if len(k.msgs) > 0 && k.bytes+len(m.Content) > k.b.Bytes {
		k.stop = true
		return
	}
	k.bytes += len(m.Content)
	k.msgs = append(k.msgs, m)
}

func (k *keeper) oldestFirst() []portcullis.Message {
	out := make([]portcullis.Message, len(k.msgs))
	for i, m := range k.msgs {
		out[len(out)-1-i] = m
	}
	return out
}

func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// transcriptLine is a line of a Claude Code or Codex transcript.
type transcriptLine struct {
	Type string `json:"type"`
	// Claude Code.
	IsSidechain      bool `json:"isSidechain"`
	IsMeta           bool `json:"isMeta"`
	IsCompactSummary bool `json:"isCompactSummary"`
	Message          *struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
	// Codex.
	Payload *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		Output  string `json:"output"`
	} `json:"payload"`
}

type contentBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Name    string          `json:"name"`
	Input   json.RawMessage `json:"input"`
	Content json.RawMessage `json:"content"`
}

// lineMessages reads the messages of one transcript line, in order. A line
// that is not understood gives none.
func lineMessages(line []byte) []portcullis.Message {
	var l transcriptLine
	if json.Unmarshal(line, &l) != nil {
		return nil
	}
	if l.Payload != nil {
		switch {
		case l.Type == "event_msg" && l.Payload.Type == "user_message":
			return []portcullis.Message{{Role: "user", Content: l.Payload.Message}}
		case l.Type == "event_msg" && l.Payload.Type == "agent_message":
			return []portcullis.Message{{Role: "assistant", Content: l.Payload.Message}}
		case l.Type == "response_item" && l.Payload.Type == "function_call_output":
			return []portcullis.Message{{Role: "tool", Content: l.Payload.Output}}
		}
		return nil
	}
	if l.Message == nil || l.IsSidechain || l.IsMeta || l.IsCompactSummary {
		return nil
	}
	if l.Type != "user" && l.Type != "assistant" {
		return nil
	}
	role := l.Type
	var s string
	if json.Unmarshal(l.Message.Content, &s) == nil {
		return []portcullis.Message{{Role: role, Content: s}}
	}
	var blocks []contentBlock
	if json.Unmarshal(l.Message.Content, &blocks) != nil {
		return nil
	}
	var out []portcullis.Message
	for _, b := range blocks {
		switch b.Type {
		case "text":
			out = append(out, portcullis.Message{Role: role, Content: b.Text})
		case "tool_use":
			var in bytes.Buffer
			if json.Compact(&in, b.Input) != nil {
				in.Reset()
			}
			out = append(out, portcullis.Message{Role: "assistant", Content: "[tool call " + b.Name + "] " + in.String()})
		case "tool_result":
			out = append(out, portcullis.Message{Role: "tool", Content: blockText(b.Content)})
		}
	}
	return out
}

// blockText is a tool result's content: a string or text blocks.
func blockText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []contentBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var b strings.Builder
	for _, x := range blocks {
		if x.Type == "text" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(x.Text)
		}
	}
	return b.String()
}

// geminiMessages reads Gemini CLI's session file.
func geminiMessages(data []byte, b TranscriptBounds) ([]portcullis.Message, error) {
	var f struct {
		Messages []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("gemini transcript: %w", describe(err))
	}
	var kept keeper
	kept.b = b
	for i := len(f.Messages) - 1; i >= 0 && !kept.full(); i-- {
		m := f.Messages[i]
		var role string
		switch m.Type {
		case "user":
			role = "user"
		case "gemini":
			role = "assistant"
		default:
			continue
		}
		kept.add(portcullis.Message{Role: role, Content: geminiText(m.Content)})
	}
	return kept.oldestFirst(), nil
}

// geminiText is a message's content: a string, or parts with text.
func geminiText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}
