// Package metrics exposes Portcullis's Prometheus metrics: decisions by
// outcome, level, code, deciding stage and tool, with their latency (whole
// pipeline and per stage); validator calls; approval waits and pending
// approvals; active blocks; store operations; upstream MCP calls and
// restarts; policy reloads; audit witnesses' lag.
//
// It is an adapter: it imports the root package and
// github.com/prometheus/client_golang only. A *Metrics is a
// portcullis.DecisionObserver (give it to gate.WithObserver) and has the
// methods of the MCP gateway's Observer (give it as mcpgw.Config.Observer);
// Store wraps a store to time its operations. It never sees a call's
// arguments, and bounds its labels: a tool the policy does not name is
// counted as "other".
package metrics

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/portcullis/portcullis"
)

// OtherTool is the tool label of decisions on tools the policy does not
// name, so an agent inventing tool names cannot grow the series.
const OtherTool = "other"

// State is what the scrape-time gauges read: pending approvals and active
// blocks. A portcullis.Store satisfies it.
type State interface {
	Approvals(ctx context.Context, f portcullis.ApprovalFilter) ([]portcullis.Approval, error)
	Blocks(ctx context.Context) ([]portcullis.Block, error)
}

// Options configure Metrics.
type Options struct {
	// State is read at every scrape for the pending approvals and active
	// blocks gauges; nil: those gauges are not exported.
	State State
	// Clock tells the age of pending approvals (default the system clock).
	Clock portcullis.Clock
	// Registry receives the metrics (default: a new registry with the Go
	// runtime and process collectors).
	Registry *prometheus.Registry
}

// Metrics is the set of Portcullis metrics. It is safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	decisions        *prometheus.CounterVec
	decisionSeconds  *prometheus.HistogramVec
	stageSeconds     *prometheus.HistogramVec
	validatorCalls   *prometheus.CounterVec
	validatorBudget  *prometheus.CounterVec
	validatorSeconds *prometheus.HistogramVec
	approvalWait     *prometheus.HistogramVec
	storeOps         *prometheus.HistogramVec
	storeErrors      *prometheus.CounterVec
	mcpCalls         *prometheus.CounterVec
	upstreamCalls    *prometheus.CounterVec
	upstreamErrors   *prometheus.CounterVec
	upstreamSeconds  *prometheus.HistogramVec
	upstreamRestarts *prometheus.CounterVec
	framesSkipped    *prometheus.CounterVec
	reloads          prometheus.Counter
	reloadFailures   prometheus.Counter
	policyLoaded     prometheus.Gauge
	authFailures     *prometheus.CounterVec
	witnessLag       *prometheus.GaugeVec
	witnessKept      *prometheus.GaugeVec
	witnessFailures  *prometheus.CounterVec

	// The histograms of the known stages and outcomes, looked up once
	// (a decision observes five or six of them).
	stageObs   map[string]prometheus.Observer
	outcomeObs map[portcullis.Outcome]prometheus.Observer
}

// stages are the pipeline's stages (docs/ARCHITECTURE.md), and request for a call
// rejected before it.
var stages = []string{"request", "mode", "danger_zone", "route", "elements", "autonomy", "validator", "confirmation", "retry_guard", "audit"}

// Decision latencies are microseconds to milliseconds; validator, store and
// upstream latencies up to seconds; approval waits up to minutes.
var (
	decisionBuckets = []float64{5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	ioBuckets       = []float64{1e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	waitBuckets     = []float64{.1, .5, 1, 2.5, 5, 10, 20, 30, 45, 60, 120, 300, 900}
)

// New returns the metrics, registered in o.Registry (or a registry of
// their own).
func New(o Options) *Metrics {
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if o.Clock == nil {
		o.Clock = portcullis.SystemClock{}
	}
	m := &Metrics{
		reg: reg,
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_decisions_total",
			Help: "Decisions by outcome, permission level, code, the stage that decided, and tool (\"other\" for tools the policy does not name).",
		}, []string{"outcome", "level", "code", "stage", "tool"}),
		decisionSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "portcullis_decision_duration_seconds", Help: "How long a decision took, the whole pipeline with its audit row, by outcome.",
			Buckets: decisionBuckets,
		}, []string{"outcome"}),
		stageSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "portcullis_stage_duration_seconds", Help: "How long each stage of the decision pipeline took.",
			Buckets: decisionBuckets,
		}, []string{"stage"}),
		validatorCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_validator_calls_total",
			Help: "Validator verdicts by verdict (allow, deny, migration-bypass), provider, cache hit and fail-closed.",
		}, []string{"verdict", "provider", "cached", "fail_closed"}),
		validatorBudget: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_validator_budget_refusals_total",
			Help: "Calls denied because the agent's budget of validator calls was spent, by provider.",
		}, []string{"provider"}),
		validatorSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "portcullis_validator_duration_seconds", Help: "How long the validator took to answer, by provider and cache hit.",
			Buckets: ioBuckets,
		}, []string{"provider", "cached"}),
		approvalWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "portcullis_approval_wait_seconds", Help: "How long a call held by the MCP gateway waited for a person, by how the wait ended.",
			Buckets: waitBuckets,
		}, []string{"result"}),
		storeOps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "portcullis_store_operation_duration_seconds", Help: "How long store operations took, by operation.",
			Buckets: ioBuckets,
		}, []string{"op"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_store_errors_total", Help: "Store operations that failed (not counting answers such as not found or conflict), by operation.",
		}, []string{"op"}),
		mcpCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_mcp_calls_total", Help: "tools/call requests the MCP gateway answered, by result (forwarded, denied, held, refused, error).",
		}, []string{"result"}),
		upstreamCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_upstream_calls_total", Help: "Calls forwarded to upstream MCP servers, by upstream and result (ok, tool_error, error).",
		}, []string{"upstream", "result"}),
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_upstream_errors_total", Help: "Forwarded calls that failed (transport, protocol, timeout, upstream down), by upstream.",
		}, []string{"upstream"}),
		upstreamSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "portcullis_upstream_call_duration_seconds", Help: "How long upstream MCP servers took to answer forwarded calls.",
			Buckets: ioBuckets,
		}, []string{"upstream"}),
		upstreamRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_upstream_restarts_total", Help: "Times an upstream MCP server's session ended and the gateway restarted it.",
		}, []string{"upstream"}),
		framesSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_upstream_frames_skipped_total",
			Help: "Lines a stdio upstream wrote on its stdout that were not delivered as messages, by reason: not_json (a log line on the wrong stream), not_jsonrpc, too_large (its call failed), bad_response (its call failed). The session goes on.",
		}, []string{"upstream", "reason"}),
		reloads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "portcullis_policy_reloads_total", Help: "Policy files reloaded and put in force.",
		}),
		reloadFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "portcullis_policy_reload_failures_total", Help: "Changed policy files rejected; the last good policy stayed in force.",
		}),
		policyLoaded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "portcullis_policy_loaded_timestamp_seconds", Help: "When the policy in force was loaded (Unix time).",
		}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_auth_failures_total",
			Help: "Wrong credentials presented to serve, by entry (api, mcp, console) and whether the client had used up its allowance and was answered 429.",
		}, []string{"entry", "limited"}),
		witnessLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "portcullis_audit_witness_lag_rows", Help: "Audit rows appended since the newest head the witness kept.",
		}, []string{"witness"}),
		witnessKept: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "portcullis_audit_witness_last_kept_timestamp_seconds", Help: "When the witness last kept a head of the audit chain (Unix time; 0: never).",
		}, []string{"witness"}),
		witnessFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_audit_witness_failures_total", Help: "Rounds in which a witness did not keep the audit chain's head.",
		}, []string{"witness"}),
	}
	reg.MustRegister(m.decisions, m.decisionSeconds, m.stageSeconds, m.validatorCalls, m.validatorBudget, m.validatorSeconds,
		m.approvalWait, m.storeOps, m.storeErrors, m.mcpCalls, m.upstreamCalls, m.upstreamErrors,
		m.upstreamSeconds, m.upstreamRestarts, m.framesSkipped, m.reloads, m.reloadFailures, m.policyLoaded, m.authFailures,
		m.witnessLag, m.witnessKept, m.witnessFailures)
	m.stageObs = make(map[string]prometheus.Observer, len(stages))
	for _, s := range stages {
		m.stageObs[s] = m.stageSeconds.WithLabelValues(s)
	}
	m.outcomeObs = make(map[portcullis.Outcome]prometheus.Observer, len(portcullis.Outcomes))
	for _, o := range portcullis.Outcomes {
		m.outcomeObs[o] = m.decisionSeconds.WithLabelValues(string(o))
	}
	if o.State != nil {
		reg.MustRegister(&stateCollector{state: o.State, clock: o.Clock})
	}
	return m
}

// Registry returns the registry the metrics are in.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus exposition format. It does
// no authentication: mount it behind a check (see cmd/portcullis).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

var _ portcullis.DecisionObserver = (*Metrics)(nil)

// ObserveDecision counts a decision and its latencies. Explanations
// (Gate.Explain) are not counted: they decide nothing.
func (m *Metrics) ObserveDecision(_ context.Context, ev *portcullis.DecisionEvent) {
	if ev.Explain || ev.Decision == nil {
		return
	}
	d := ev.Decision
	tool := OtherTool
	if ev.PolicyTool {
		tool = d.Tool
	}
	m.decisions.WithLabelValues(string(d.Outcome), d.PermissionLevel.String(), string(d.Code), ev.DecidingStage(), tool).Inc()
	if h, ok := m.outcomeObs[d.Outcome]; ok {
		h.Observe(ev.Duration.Seconds())
	} else {
		m.decisionSeconds.WithLabelValues(string(d.Outcome)).Observe(ev.Duration.Seconds())
	}
	for _, s := range ev.Stages {
		if h, ok := m.stageObs[s.Stage]; ok {
			h.Observe(s.Duration.Seconds())
		} else {
			m.stageSeconds.WithLabelValues(s.Stage).Observe(s.Duration.Seconds())
		}
	}
	if v := ev.Validator; v != nil {
		cached := strconv.FormatBool(v.Cached)
		m.validatorCalls.WithLabelValues(v.Verdict, v.Provider, cached, strconv.FormatBool(v.FailClosed)).Inc()
		if v.OverBudget {
			m.validatorBudget.WithLabelValues(v.Provider).Inc()
		}
		if v.Verdict != "migration-bypass" {
			m.validatorSeconds.WithLabelValues(v.Provider, cached).Observe(time.Duration(v.LatencyNS).Seconds())
		}
	}
}

// StartCall counts a tools/call of the MCP gateway when it is answered.
func (m *Metrics) StartCall(ctx context.Context, _, _, _ string) (context.Context, func(string, error)) {
	return ctx, func(result string, _ error) { m.mcpCalls.WithLabelValues(result).Inc() }
}

// UpstreamCall counts a call forwarded to an upstream and its latency.
func (m *Metrics) UpstreamCall(_ context.Context, upstream, _ string, took time.Duration, isError bool, err error) {
	result := "ok"
	switch {
	case err != nil:
		result = "error"
		m.upstreamErrors.WithLabelValues(upstream).Inc()
	case isError:
		result = "tool_error"
	}
	m.upstreamCalls.WithLabelValues(upstream, result).Inc()
	if took > 0 {
		m.upstreamSeconds.WithLabelValues(upstream).Observe(took.Seconds())
	}
}

// UpstreamRestart counts an upstream's restart.
func (m *Metrics) UpstreamRestart(upstream string, _ error) {
	m.upstreamRestarts.WithLabelValues(upstream).Inc()
}

// UpstreamFrameSkipped counts a line a stdio upstream wrote that was not
// delivered as a message (mcpgw.FrameObserver).
func (m *Metrics) UpstreamFrameSkipped(upstream, reason string) {
	m.framesSkipped.WithLabelValues(upstream, reason).Inc()
}

// ApprovalWait records how long a held call waited for a person.
func (m *Metrics) ApprovalWait(_, result string, waited time.Duration) {
	m.approvalWait.WithLabelValues(result).Observe(waited.Seconds())
}

// PolicyLoaded records that a policy was put in force (at start or by a
// reload).
func (m *Metrics) PolicyLoaded(at time.Time, reload bool) {
	if reload {
		m.reloads.Inc()
	}
	m.policyLoaded.Set(float64(at.UnixNano()) / 1e9)
}

// ObserveWitness records an audit witness's state after a round of
// publishing: how many rows it lags, when it last kept a head, and whether
// this round failed. The witness label is its configured name (the
// configuration bounds the series).
func (m *Metrics) ObserveWitness(witness string, lagRows int64, lastKept time.Time, failed bool) {
	m.witnessLag.WithLabelValues(witness).Set(float64(lagRows))
	kept := 0.0
	if !lastKept.IsZero() {
		kept = float64(lastKept.UnixNano()) / 1e9
	}
	m.witnessKept.WithLabelValues(witness).Set(kept)
	if failed {
		m.witnessFailures.WithLabelValues(witness).Inc()
	} else {
		m.witnessFailures.WithLabelValues(witness).Add(0)
	}
}

// PolicyReloadFailed counts a changed policy file that was rejected.
func (m *Metrics) PolicyReloadFailed() { m.reloadFailures.Inc() }

// AuthFailure counts a wrong credential presented at entry ("api", "mcp",
// "console"); limited: the client had used up its allowance.
func (m *Metrics) AuthFailure(entry string, limited bool) {
	m.authFailures.WithLabelValues(entry, strconv.FormatBool(limited)).Inc()
}

// maxPending bounds how many pending approvals a scrape reads.
const maxPending = 10000

// stateCollector reads the store at scrape time: pending approvals, the
// age of the oldest, and active blocks.
type stateCollector struct {
	state State
	clock portcullis.Clock
}

var (
	pendingDesc = prometheus.NewDesc("portcullis_approvals_pending",
		"Approval requests waiting for a person (read from the store at scrape time, at most 10000).", nil, nil)
	pendingAgeDesc = prometheus.NewDesc("portcullis_approval_pending_oldest_age_seconds",
		"How long the oldest pending approval request has waited (0 when none).", nil, nil)
	blocksDesc = prometheus.NewDesc("portcullis_blocks_active",
		"Agents stopped in the danger zone (read from the store at scrape time).", nil, nil)
	stateUpDesc = prometheus.NewDesc("portcullis_store_up",
		"1 when the scrape could read the store, 0 when it could not.", nil, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pendingDesc
	ch <- pendingAgeDesc
	ch <- blocksDesc
	ch <- stateUpDesc
}

// scrapeTimeout bounds the store reads of one scrape.
const scrapeTimeout = 5 * time.Second

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	up := 1.0
	as, err := c.state.Approvals(ctx, portcullis.ApprovalFilter{Status: portcullis.ApprovalPending, Limit: maxPending})
	if err == nil {
		now := c.clock.Now()
		oldest := 0.0
		for _, a := range as {
			if age := now.Sub(a.CreatedAt).Seconds(); age > oldest {
				oldest = age
			}
		}
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(len(as)))
		ch <- prometheus.MustNewConstMetric(pendingAgeDesc, prometheus.GaugeValue, oldest)
	} else {
		up = 0
	}
	bs, err := c.state.Blocks(ctx)
	if err == nil {
		ch <- prometheus.MustNewConstMetric(blocksDesc, prometheus.GaugeValue, float64(len(bs)))
	} else {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(stateUpDesc, prometheus.GaugeValue, up)
}

// isStoreError says whether a store error is a failure of the store
// rather than an answer (not found, conflict, an invalid request) or the
// caller going away.
func isStoreError(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	switch portcullis.ErrorCode(err) {
	case portcullis.CodeNotFound, portcullis.CodeConflict, portcullis.CodeInvalidRequest,
		portcullis.CodeVerificationFailed, portcullis.CodeRateLimited:
		return false
	}
	return true
}
