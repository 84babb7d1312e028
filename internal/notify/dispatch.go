package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/present"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/presentation"
)

// Opener builds the Channel of one channel entry (channels.Open: the webhook, slack and email
// drivers).
type Opener func(ChannelConfig) (Channel, error)

// Metrics are the dispatcher's Prometheus metrics (register Collectors with the process's
// registry). Counters are per process: sum them across workers.
type Metrics struct {
	// Sent counts delivered notices (airlock_notices_sent_total, labels channel, kind).
	Sent *prometheus.CounterVec
	// Failures counts failed send attempts (airlock_notice_failures_total, label channel).
	Failures *prometheus.CounterVec
	// GivenUp counts deliveries abandoned after their last attempt (airlock_notices_given_up_total).
	GivenUp *prometheus.CounterVec
	// Skipped counts notices not sent because the confirmation was decided or expired first
	// (airlock_notices_skipped_total, label kind).
	Skipped *prometheus.CounterVec
	queued  prometheus.GaugeFunc
}

// NewMetrics creates the dispatcher metrics; st, if set, feeds airlock_notices_queued (the
// outbox's undelivered notices, read at scrape time: take the max across workers).
func NewMetrics(st *store.Store) *Metrics {
	m := &Metrics{
		Sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "airlock_notices_sent_total",
			Help: "Approver notices delivered, by channel and kind."}, []string{"channel", "kind"}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "airlock_notice_failures_total",
			Help: "Failed attempts to deliver an approver notice, by channel."}, []string{"channel"}),
		GivenUp: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "airlock_notices_given_up_total",
			Help: "Approver notices abandoned after their last attempt, by channel."}, []string{"channel"}),
		Skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "airlock_notices_skipped_total",
			Help: "Approver notices not sent because the confirmation was decided or expired first, by kind."}, []string{"kind"}),
	}
	if st != nil {
		m.queued = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "airlock_notices_queued",
			Help: "Approver notices in the outbox not delivered yet (due or scheduled)."}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			s, err := st.NoticeOutboxStats(ctx)
			if err != nil {
				return -1
			}
			return float64(s.Queued)
		})
	}
	return m
}

// Collectors are m's metrics, to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	cs := []prometheus.Collector{m.Sent, m.Failures, m.GivenUp, m.Skipped}
	if m.queued != nil {
		cs = append(cs, m.queued)
	}
	return cs
}

// Dispatcher delivers the outbox: it claims due deliveries with a lease, sends each on its own
// goroutine (so one slow channel holds up no other), records sent, skipped (decided or expired
// first), queued again after a backoff, or failed after MaxAttempts, and audits each end. It
// runs beside the worker, never inside a turn.
type Dispatcher struct {
	Store  *store.Store
	Source *Source
	Open   Opener
	Log    *slog.Logger
	// Metrics, if set, counts deliveries.
	Metrics *Metrics
	// Poll is how often the outbox is read (default 250ms).
	Poll time.Duration
	// Lease is how long a claimed delivery is held (default 2m); a send is cut at half of it,
	// so a row is never sent by two dispatchers at once.
	Lease time.Duration
	// MaxAttempts bounds the attempts of one delivery (default 12: about 1h of backoff).
	MaxAttempts int
	// Backoff is the wait after failed attempt n (default 1s·2^(n-1) up to 10m, ±20% jitter).
	Backoff func(n int) time.Duration
	// Now is the clock (time.Now by default).
	Now func() time.Time

	mu       sync.Mutex
	revision string
	chans    map[string]Channel
	openErr  map[string]error
	inflight sync.WaitGroup
}

func (d *Dispatcher) now() time.Time {
	if d.Now != nil {
		return d.Now().UTC()
	}
	return time.Now().UTC()
}

func (d *Dispatcher) lease() time.Duration {
	if d.Lease > 0 {
		return d.Lease
	}
	return 2 * time.Minute
}

func (d *Dispatcher) backoff(n int) time.Duration {
	if d.Backoff != nil {
		return d.Backoff(n)
	}
	b := time.Second << min(n-1, 10)
	if b > 10*time.Minute {
		b = 10 * time.Minute
	}
	return time.Duration(float64(b) * (0.8 + 0.4*rand.Float64()))
}

// Run delivers until ctx ends, then waits for the sends in flight. It returns ctx's error.
func (d *Dispatcher) Run(ctx context.Context) error {
	poll := d.Poll
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	defer d.inflight.Wait()
	for {
		if err := d.Tick(ctx); err != nil && ctx.Err() == nil && d.Log != nil {
			d.Log.Warn("notice dispatcher", "error", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Tick claims the due deliveries once and starts their sends (tests drive it directly; Wait
// waits for the sends).
func (d *Dispatcher) Tick(ctx context.Context) error {
	f, rev, ferr := d.Source.Current()
	if ferr != nil && f == nil {
		return ferr
	}
	d.reopen(f, rev)
	claimed, err := d.Store.ClaimDeliveries(ctx, d.now(), d.lease(), 50)
	for _, del := range claimed {
		d.inflight.Add(1)
		go func() {
			defer d.inflight.Done()
			d.deliver(context.WithoutCancel(ctx), del)
		}()
	}
	return err
}

// Wait waits for the sends Tick started.
func (d *Dispatcher) Wait() { d.inflight.Wait() }

// reopen builds the channels of a new revision of the notify file.
func (d *Dispatcher) reopen(f *File, rev string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if rev == d.revision && d.chans != nil {
		return
	}
	d.revision, d.chans, d.openErr = rev, map[string]Channel{}, map[string]error{}
	for _, c := range f.Channels {
		ch, err := d.Open(c)
		if err != nil {
			d.openErr[c.Name] = err
			if d.Log != nil {
				d.Log.Error("notify channel unusable", "channel", c.Name, "error", err)
			}
			continue
		}
		d.chans[c.Name] = ch
	}
}

func (d *Dispatcher) channel(name string) (Channel, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.openErr[name]; err != nil {
		return nil, err
	}
	ch, ok := d.chans[name]
	if !ok {
		return nil, fmt.Errorf("no channel %q in the notify file in force", name)
	}
	return ch, nil
}

// deliver sends one claimed delivery and records its end.
func (d *Dispatcher) deliver(ctx context.Context, del store.Delivery) {
	switch del.Kind {
	case KindProposal:
		d.deliverProposal(ctx, del)
		return
	case KindMCPToolChanged:
		var n Notice
		if err := json.Unmarshal(del.Payload, &n); err != nil {
			d.finish(ctx, del, store.Confirmation{}, store.NoticeFailed, "stored notice unreadable: "+err.Error())
			return
		}
		d.send(ctx, del, store.Confirmation{}, n)
		return
	}
	c, err := d.Store.GetConfirmation(ctx, del.ConfirmationID)
	now := d.now()
	final := del.Kind == KindDecided || del.Kind == KindExpired
	switch {
	case errors.Is(err, store.ErrNotFound):
		d.finish(ctx, del, c, store.NoticeSkipped, "the confirmation no longer exists")
		return
	case err != nil:
		d.retry(ctx, del, c, fmt.Errorf("read confirmation: %w", err))
		return
	case final:
	case c.Decision != "":
		d.finish(ctx, del, c, store.NoticeSkipped, "the confirmation was "+c.Decision+" first")
		return
	case !now.Before(c.ExpiresAt):
		d.finish(ctx, del, c, store.NoticeSkipped, "the confirmation expired first")
		return
	}
	var n Notice
	if err := json.Unmarshal(del.Payload, &n); err != nil {
		d.finish(ctx, del, c, store.NoticeFailed, "stored notice unreadable: "+err.Error())
		return
	}
	// The presentation as it stands now (votes so far, the requester, a decided call's
	// outcome): the one every surface shows. A notice stored before airlock.notice.v1 gets
	// its envelope here.
	n.Schema, n.Kind = SchemaV1, EventOf(del.Kind)
	in := present.Input(c)
	in.Limit, in.Now = valueLimit, now
	if err := present.Gather(ctx, d.Store, c, &in); err != nil {
		d.retry(ctx, del, c, fmt.Errorf("present confirmation: %w", err))
		return
	}
	n.Present(presentation.Build(in))
	d.send(ctx, del, c, n)
}

// send hands n to its channel and records the end.
func (d *Dispatcher) send(ctx context.Context, del store.Delivery, c store.Confirmation, n Notice) {
	ch, err := d.channel(del.Channel)
	if err != nil {
		d.retry(ctx, del, c, err)
		return
	}
	sctx, cancel := context.WithTimeout(ctx, d.lease()/2)
	defer cancel()
	if err := ch.Send(sctx, n); err != nil {
		d.retry(ctx, del, c, err)
		return
	}
	d.finish(ctx, del, c, store.NoticeSent, "")
}

// deliverProposal sends an agent proposal's notice unless it was decided first. Its audit rows
// name the proposal's turn (c carries only the workflow id).
func (d *Dispatcher) deliverProposal(ctx context.Context, del store.Delivery) {
	var c store.Confirmation
	p, err := d.Store.GetProposal(ctx, del.ConfirmationID)
	if errors.Is(err, store.ErrNotFound) {
		d.finish(ctx, del, c, store.NoticeSkipped, "the proposal no longer exists")
		return
	} else if err != nil {
		d.retry(ctx, del, c, fmt.Errorf("read proposal: %w", err))
		return
	}
	c.WorkflowID = p.WorkflowID
	if dec, err := d.Store.GetProposalDecision(ctx, p.ID); err == nil {
		d.finish(ctx, del, c, store.NoticeSkipped, "the proposal was decided first ("+dec.Disposition+")")
		return
	} else if !errors.Is(err, store.ErrNotFound) {
		d.retry(ctx, del, c, fmt.Errorf("read proposal decision: %w", err))
		return
	}
	var n Notice
	if err := json.Unmarshal(del.Payload, &n); err != nil {
		d.finish(ctx, del, c, store.NoticeFailed, "stored notice unreadable: "+err.Error())
		return
	}
	d.send(ctx, del, c, n)
}

// retry records a failed attempt: queued again after the backoff, or failed after the last.
func (d *Dispatcher) retry(ctx context.Context, del store.Delivery, c store.Confirmation, err error) {
	detail := display.Summary(display.OneLine(err.Error()), 300)
	if d.Metrics != nil {
		d.Metrics.Failures.WithLabelValues(del.Channel).Inc()
	}
	if d.Log != nil {
		d.Log.Warn("notice not delivered", "delivery", del.ID, "channel", del.Channel, "attempt", del.Attempts, "error", detail)
	}
	max := d.MaxAttempts
	if max <= 0 {
		max = 12
	}
	if del.Attempts >= max {
		d.finish(ctx, del, c, store.NoticeFailed, fmt.Sprintf("gave up after %d attempts: %s", del.Attempts, detail))
		return
	}
	now := d.now()
	if ferr := d.Store.FinishDelivery(ctx, del.ID, store.NoticeQueued, detail, now.Add(d.backoff(del.Attempts)), now); ferr != nil && d.Log != nil {
		d.Log.Error("notice outbox", "error", ferr)
	}
}

// finish records a delivery's end, audits it and counts it.
func (d *Dispatcher) finish(ctx context.Context, del store.Delivery, c store.Confirmation, state, detail string) {
	now := d.now()
	if err := d.Store.FinishDelivery(ctx, del.ID, state, detail, now, now); err != nil {
		if d.Log != nil {
			d.Log.Error("notice outbox", "error", err)
		}
		return
	}
	if d.Metrics != nil {
		switch state {
		case store.NoticeSent:
			d.Metrics.Sent.WithLabelValues(del.Channel, del.Kind).Inc()
		case store.NoticeSkipped:
			d.Metrics.Skipped.WithLabelValues(del.Kind).Inc()
		case store.NoticeFailed:
			d.Metrics.GivenUp.WithLabelValues(del.Channel).Inc()
		}
	}
	switch del.Kind {
	case KindDecided, KindExpired, KindMCPToolChanged:
		// Recorded in the outbox (airlock doctor shows it), not in the audit: these notices
		// follow an event the audit holds already (the decision, the expiry, the MCP change).
		return
	}
	text := del.Kind + " notice to " + del.Channel
	if detail != "" {
		text += ": " + detail
	}
	_, err := d.Store.AppendAudit(ctx, store.AuditEvent{
		Key: "notice/" + del.ID + "/" + state, WorkflowID: c.WorkflowID, RunID: c.RunID, Seq: c.Seq, CallID: c.CallID,
		CapabilityID: c.CapabilityID, Version: c.Version, Outcome: "notice_" + state, Stage: "notify",
		Reason: del.Kind, Detail: text, ArgsDigest: c.ArgsDigest, At: now,
	})
	if err != nil && d.Log != nil {
		d.Log.Error("notice audit", "error", err)
	}
}
