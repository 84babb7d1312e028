package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/store"
)

// Metrics are one process's Prometheus metrics: the Temporal SDK's (workflow and activity
// task latencies, poll counts, failures: temporal_*) and Airlock's own (airlock_*). Airlock's
// counters are per process: sum them across workers. airlock_confirmations_pending is read from
// the shared store at scrape time, so every worker reports the same number: take the max.
type Metrics struct {
	// Registry holds every metric; Handler serves it.
	Registry *prometheus.Registry
	// Proposals counts proposal outcomes recorded in stage 6 (airlock_proposals_total, labels
	// outcome and reason: executed, rejected/<code>, denied, expired, parse_failed/<reason>, …).
	Proposals *prometheus.CounterVec
	// ParseFailures counts parse failures by reason (airlock_parse_failures_total).
	ParseFailures *prometheus.CounterVec
	// OutcomeUnknown counts effects interrupted mid-run and reported outcome_unknown, never
	// re-run (airlock_effects_outcome_unknown_total).
	OutcomeUnknown prometheus.Counter
	// Decisions counts confirmation decisions recorded (airlock_decisions_total, label decision:
	// approved, denied, expired).
	Decisions *prometheus.CounterVec
	// TimeToDecision observes the seconds from a confirmation's issue to its human decision
	// (airlock_time_to_decision_seconds; approvals and denials, not expiries).
	TimeToDecision prometheus.Histogram
	// StoreUnavailable counts activity attempts that failed because the store could not be
	// reached, by step (airlock_store_unavailable_total, label step: the activity type): each
	// is retried with backoff, so a turn waits out a short outage; a rising count is a store
	// that is down.
	StoreUnavailable *prometheus.CounterVec

	sdk *sdkmetric.MeterProvider
}

// NewMetrics creates the metrics of one process. pending, if set, is read at each scrape for
// airlock_confirmations_pending (the store's undecided, unexpired confirmations).
func NewMetrics(pending func(context.Context) (int, error)) (*Metrics, error) {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		Proposals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "airlock_proposals_total",
			Help: "Proposal outcomes recorded (stage 6), by outcome and reason."}, []string{"outcome", "reason"}),
		ParseFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "airlock_parse_failures_total",
			Help: "Model tool calls that failed strict parsing, by reason."}, []string{"reason"}),
		OutcomeUnknown: prometheus.NewCounter(prometheus.CounterOpts{Name: "airlock_effects_outcome_unknown_total",
			Help: "Effects interrupted mid-run whose outcome is unknown (never re-run)."}),
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "airlock_decisions_total",
			Help: "Confirmation decisions recorded, by decision."}, []string{"decision"}),
		TimeToDecision: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "airlock_time_to_decision_seconds",
			Help:    "Seconds from a confirmation's issue to a human's approval or denial.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800}}),
		StoreUnavailable: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "airlock_store_unavailable_total",
			Help: "Activity attempts that failed because the store could not be reached (retried with backoff), by step."}, []string{"step"}),
	}
	cs := []prometheus.Collector{m.Proposals, m.ParseFailures, m.OutcomeUnknown, m.Decisions, m.TimeToDecision, m.StoreUnavailable,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
	if pending != nil {
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "airlock_confirmations_pending",
			Help: "Confirmations waiting for a human (read from the store at scrape; the same on every worker)."},
			func() float64 {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				n, err := pending(ctx)
				if err != nil {
					return -1
				}
				return float64(n)
			}))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("telemetry: register metric: %w", err)
		}
	}
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	m.sdk = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	return m, nil
}

// PendingFromStore counts the store's pending confirmations, for NewMetrics.
func PendingFromStore(st *store.Store) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		rows, err := st.ListPendingConfirmations(ctx, time.Now())
		return len(rows), err
	}
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// SDKHandler is the Temporal SDK metrics handler (client.Options.MetricsHandler) whose
// metrics Handler serves (temporal_* names).
func (m *Metrics) SDKHandler() client.MetricsHandler {
	return temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{Meter: m.sdk.Meter("airlock")})
}

// Interceptor counts Airlock's events from the activities a worker runs (including local
// activities): stage 6 (Record) for outcomes, parse failures, outcome_unknown and decisions.
// It reads the store for a decided confirmation's issue and decision times. Add it to
// client.Options.Interceptors of the worker's client.
func (m *Metrics) Interceptor(st *store.Store) interceptor.Interceptor {
	return &counting{m: m, st: st}
}

// Shutdown flushes and stops the SDK meter provider.
func (m *Metrics) Shutdown(ctx context.Context) error { return m.sdk.Shutdown(ctx) }

type counting struct {
	interceptor.InterceptorBase
	m  *Metrics
	st *store.Store
}

func (c *counting) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &countingActivity{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, c: c}
}

type countingActivity struct {
	interceptor.ActivityInboundInterceptorBase
	c *counting
}

// ExecuteActivity runs the activity and, when it was stage 6 (its argument a RecordInput, or
// an ExecuteRecordedInput) and succeeded, counts what it recorded.
func (a *countingActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	res, err := a.Next.ExecuteActivity(ctx, in)
	if err != nil && store.Unavailable(err) {
		a.c.m.StoreUnavailable.WithLabelValues(activity.GetInfo(ctx).ActivityType.Name).Inc()
	}
	if err != nil || len(in.Args) != 1 {
		return res, err
	}
	rec, ok := in.Args[0].(activities.RecordInput)
	if !ok {
		if p, isPtr := in.Args[0].(*activities.RecordInput); isPtr && p != nil {
			rec, ok = *p, true
		}
	}
	if ok {
		a.c.observe(ctx, rec)
	}
	// ExecuteRecorded (folded rounds) records an automatic call's outcome itself: the audit row
	// it wrote is the outcome it returns.
	if er, folded := in.Args[0].(activities.ExecuteRecordedInput); folded {
		if out, isOut := res.(activities.ExecuteOutput); isOut {
			a.c.observe(ctx, activities.RecordInput{Audit: &activities.AuditRecord{Kind: string(out.Outcome), Reason: out.Reason}, Decision: er.Decision})
		}
	}
	return res, nil
}

// observe counts one successful Record.
func (c *counting) observe(ctx context.Context, rec activities.RecordInput) {
	if r := rec.Audit; r != nil && isOutcome(activities.Outcome(r.Kind)) {
		c.m.Proposals.WithLabelValues(r.Kind, r.Reason).Inc()
		switch activities.Outcome(r.Kind) {
		case activities.OutcomeParseFailed:
			c.m.ParseFailures.WithLabelValues(r.Reason).Inc()
		case activities.OutcomeUnknown:
			c.m.OutcomeUnknown.Inc()
		}
	}
	if d := rec.Decision; d != nil && d.Decision != "" {
		c.m.Decisions.WithLabelValues(d.Decision).Inc()
		if d.Decision != store.DecisionExpired && c.st != nil {
			row, err := c.st.GetConfirmation(ctx, d.ConfirmationID)
			if err == nil && row.DecidedAt != nil && !row.CreatedAt.IsZero() {
				c.m.TimeToDecision.Observe(row.DecidedAt.Sub(row.CreatedAt).Seconds())
			}
		}
	}
}

func isOutcome(o activities.Outcome) bool {
	switch o {
	case activities.OutcomeExecuted, activities.OutcomeRejected, activities.OutcomeDenied, activities.OutcomeExpired,
		activities.OutcomeParseFailed, activities.OutcomeBudgetExhausted, activities.OutcomeCaptured,
		activities.OutcomeUnknown, activities.OutcomeFailed:
		return true
	}
	return false
}
