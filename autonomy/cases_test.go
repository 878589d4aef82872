package autonomy_test

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
)

// caseFile is testdata/cases.json: the data-driven cases of this package,
// one list per function under test.
type caseFile struct {
	Patterns []patternCase `json:"patterns"`
}

// patternCase is one MatchPattern case. Repeat, when set, repeats the
// pattern (or the text) that many times, for cases about length.
type patternCase struct {
	Name          string `json:"name"`
	Pattern       string `json:"pattern"`
	RepeatPattern int    `json:"repeatPattern"`
	Text          string `json:"text"`
	RepeatText    int    `json:"repeatText"`
	Want          bool   `json:"want"`
}

func (c patternCase) pattern() string { return repeat(c.Pattern, c.RepeatPattern) }
func (c patternCase) text() string    { return repeat(c.Text, c.RepeatText) }

func repeat(s string, n int) string {
	if n == 0 {
		return s
	}
	return strings.Repeat(s, n)
}

var loadOnce = sync.OnceValues(func() (caseFile, error) {
	var f caseFile
	b, err := os.ReadFile("testdata/cases.json")
	if err != nil {
		return f, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err = dec.Decode(&f)
	return f, err
})

// loadCases reads testdata/cases.json once for all tests.
func loadCases(t *testing.T) caseFile {
	t.Helper()
	f, err := loadOnce()
	if err != nil {
		t.Fatalf("testdata/cases.json: %v", err)
	}
	return f
}
