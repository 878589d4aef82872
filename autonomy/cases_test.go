package autonomy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/autonomy"
)

// caseFile is testdata/cases.json: the data-driven cases of this package,
// one list per function under test.
type caseFile struct {
	Patterns   []patternCase   `json:"patterns"`
	Tiers      []tierCase      `json:"tiers"`
	Scores     []scoreCase     `json:"scores"`
	Sanitize   []sanitizeCase  `json:"sanitize"`
	Thresholds []thresholdCase `json:"thresholds"`
	Evaluate   []evaluateCase  `json:"evaluate"`
}

// evaluateCase is one Evaluate case: an input and the directive it must
// give. Reason lists words the reason must contain; a continue must have
// none.
type evaluateCase struct {
	Name  string    `json:"name"`
	Input evalInput `json:"input"`
	Want  evalWant  `json:"want"`
}

type evalInput struct {
	Agent           string                 `json:"agent"`
	Envelope        *portcullis.Autonomy   `json:"envelope"` // keys as in the policy file
	Step            int                    `json:"step"`
	PreviousOutcome portcullis.StepOutcome `json:"previousOutcome"`
	RiskScore       *number                `json:"riskScore"`
	NextActionHint  string                 `json:"nextActionHint"`
	Blocked         bool                   `json:"blocked"`
}

func (in evalInput) input() autonomy.Input {
	var risk *float64
	if in.RiskScore != nil {
		v := float64(*in.RiskScore)
		risk = &v
	}
	return autonomy.Input{
		Agent:           in.Agent,
		Envelope:        in.Envelope,
		Step:            in.Step,
		PreviousOutcome: in.PreviousOutcome,
		RiskScore:       risk,
		NextActionHint:  in.NextActionHint,
		Blocked:         in.Blocked,
	}
}

// evalWant is the part of a Directive a case checks exactly.
type evalWant struct {
	Continue       bool          `json:"continue"`
	Stopped        bool          `json:"stopped"`
	Tier           autonomy.Tier `json:"tier"`
	Challenge      bool          `json:"challenge"`
	StepsRemaining int           `json:"stepsRemaining"`
	RiskScore      float64       `json:"riskScore"`
	Reason         []string      `json:"reason"`
}

// tierCase is one TierFor case. Danger, when set, is the danger pattern the
// action must be found to contain ("" when it must contain none).
type tierCase struct {
	Name    string        `json:"name"`
	Score   number        `json:"score"`
	Action  string        `json:"action"`
	Blocked bool          `json:"blocked"`
	Want    autonomy.Tier `json:"want"`
	Danger  string        `json:"danger"`
}

type scoreCase struct {
	Endpoint   portcullis.Endpoint `json:"endpoint"`
	Elevatable bool                `json:"elevatable"`
	Want       float64             `json:"want"`
}

type sanitizeCase struct {
	Value number  `json:"value"`
	Want  float64 `json:"want"`
}

type thresholdCase struct {
	Tolerance portcullis.RiskTolerance `json:"tolerance"`
	Want      float64                  `json:"want"`
}

// number is a float64 that JSON can also give as "NaN", "+Inf" or "-Inf".
type number float64

func (n *number) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var f float64
		if err := json.Unmarshal(b, &f); err != nil {
			return err
		}
		*n = number(f)
		return nil
	}
	switch s {
	case "NaN":
		*n = number(math.NaN())
	case "+Inf":
		*n = number(math.Inf(1))
	case "-Inf":
		*n = number(math.Inf(-1))
	default:
		return fmt.Errorf("number %q: want a JSON number, \"NaN\", \"+Inf\" or \"-Inf\"", s)
	}
	return nil
}

func (n number) String() string { return strconv.FormatFloat(float64(n), 'g', -1, 64) }

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

// TestNoFactors: skipping the factors changes nothing else.
func TestNoFactors(t *testing.T) {
	risk := func(v float64) *float64 { return &v }
	for _, in := range []autonomy.Input{
		{Agent: "a", Step: 1, RiskScore: risk(10), NextActionHint: "list files"},
		{Agent: "a", Step: 1, RiskScore: risk(40), NextActionHint: "edit"},
		{Agent: "a", Step: 1, NextActionHint: "rm -rf /"},
		{Agent: "a", Step: 99},
		{Agent: "a", Step: 1, PreviousOutcome: portcullis.StepFailure},
	} {
		full := autonomy.Evaluate(in)
		in.NoFactors = true
		quiet := autonomy.Evaluate(in)
		if quiet.Factors == nil || len(quiet.Factors) != 0 {
			t.Errorf("Evaluate(%+v) with NoFactors: factors %v; want empty, not nil", in, quiet.Factors)
		}
		quiet.Factors = full.Factors
		if !reflect.DeepEqual(full, quiet) {
			t.Errorf("Evaluate(%+v): with NoFactors %+v; without %+v", in, quiet, full)
		}
	}
}
