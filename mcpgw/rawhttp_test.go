package mcpgw_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// rawSession is one Streamable HTTP session driven with hand-written
// JSON-RPC, as a lightweight load generator (like wrk) drives a server.
type rawSession struct {
	client *http.Client
	url    string
	id     string
	next   atomic.Int64
}

func (s *rawSession) post(body []byte) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer agent-token")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	return s.client.Do(req)
}

// rpc sends a request and returns the JSON-RPC response from the body
// (plain JSON or the first SSE data line).
func (s *rawSession) rpc(body []byte) (json.RawMessage, http.Header, error) {
	resp, err := s.post(body)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, nil, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(resp.Body)
		return b, resp.Header, err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		if data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
			out := bytes.Clone(data)
			io.Copy(io.Discard, resp.Body)
			return out, resp.Header, nil
		}
	}
	return nil, nil, fmt.Errorf("no data in the event stream: %v", sc.Err())
}

func rawConnect(client *http.Client, url string) (*rawSession, error) {
	s := &rawSession{client: client, url: url}
	_, h, err := s.rpc([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"load","version":"1"}}}`))
	if err != nil {
		return nil, err
	}
	s.id = h.Get("Mcp-Session-Id")
	if s.id == "" {
		return nil, fmt.Errorf("no session id")
	}
	resp, err := s.post([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return nil, fmt.Errorf("initialized: status %d", resp.StatusCode)
	}
	return s, nil
}

// callRaw makes one tools/call on s and returns its result.
func (s *rawSession) callRaw(tool string, args string) (isError bool, err error) {
	id := s.next.Add(1)
	out, _, err := s.rpc(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args))
	if err != nil {
		return false, err
	}
	var r struct {
		ID     int64 `json:"id"`
		Result *struct {
			IsError bool `json:"isError"`
		} `json:"result"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return false, err
	}
	if r.Result == nil || r.ID != id {
		return false, fmt.Errorf("response %s to request %d", out, id)
	}
	return r.Result.IsError, nil
}
