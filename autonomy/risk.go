package autonomy

import (
	"math"

	"github.com/portcullis/portcullis"
)

// The reference defaults for an agent that declares no envelope.
const (
	defaultTolerance = portcullis.Moderate
	defaultMaxSteps  = 10
)

// Defaults returns the envelope of an agent that declares none (the
// reference's DEFAULT_AUTONOMY_CONFIG): moderate risk tolerance, at most 10
// autonomous steps, and no approval patterns.
func Defaults() portcullis.Autonomy {
	return portcullis.Autonomy{RiskTolerance: defaultTolerance, MaxAutonomousSteps: defaultMaxSteps}
}

// Threshold returns the highest risk score a tolerance lets an agent take
// without a person: conservative 25, moderate 50, aggressive 75. A score
// equal to the threshold is within it. Any other tolerance, the empty one
// included, gets the conservative threshold: an envelope nobody understands
// is not a licence.
func Threshold(t portcullis.RiskTolerance) float64 {
	switch t {
	case portcullis.Moderate:
		return 50
	case portcullis.Aggressive:
		return 75
	}
	return 25
}

// SanitizeRiskScore makes any float64 a risk score from 0 to 100: NaN is
// 0, +Inf is 100, −Inf and negative scores (and −0) are 0, and scores above
// 100 are 100.
func SanitizeRiskScore(v float64) float64 {
	switch {
	case math.IsNaN(v), v <= 0:
		return 0
	case v > 100:
		return 100
	}
	return v
}
