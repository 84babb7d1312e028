package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/airlock-dev/airlock/internal/store"
)

// Outbox writes the notices a new confirmation is owed into the store's outbox. The activity
// that issues the confirmation calls Pending after storing it, on every attempt: delivery ids
// are deterministic, so a retry (after a crash between issuing and enqueuing) writes the rows
// the first attempt did not and nothing twice.
type Outbox struct {
	Store  *store.Store
	Source *Source
	// Log receives reload errors of the notify file (never a secret: the file holds none).
	Log *slog.Logger
}

// Pending enqueues the notices owed for confirmation c under the notify file in force: a
// pending notice to each routed channel now, reminders and escalations at their fractions of
// c's time to expiry. With no readable notify file it enqueues nothing and logs why. Errors
// are the store's (the caller retries).
func (o *Outbox) Pending(ctx context.Context, c store.Confirmation) error {
	f, _, err := o.Source.Current()
	if err != nil && o.Log != nil {
		o.Log.Warn("notify file", "error", err)
	}
	if f == nil {
		return nil
	}
	ds, err := Deliveries(f, c)
	if err != nil {
		return err
	}
	if _, err := o.Store.EnqueueDeliveries(ctx, ds); err != nil {
		return fmt.Errorf("notify: enqueue notices of %s: %w", c.ID, err)
	}
	return nil
}

// Proposals enqueues a notice of each agent proposal in ps to the channels the routes send
// everything to (routes without capabilities, or matching "proposal.<kind>"). Idempotent by
// delivery id.
func (o *Outbox) Proposals(ctx context.Context, ps []store.ProposalRow) error {
	f, _, err := o.Source.Current()
	if err != nil && o.Log != nil {
		o.Log.Warn("notify file", "error", err)
	}
	if f == nil {
		return nil
	}
	var ds []store.Delivery
	for _, p := range ps {
		for _, ch := range f.PlanFor("proposal."+p.Kind, nil).Now {
			n := BuildProposal(p, ch, f.BaseURL)
			b, err := json.Marshal(n)
			if err != nil {
				return fmt.Errorf("notify: encode notice: %w", err)
			}
			due := p.CreatedAt
			if due.IsZero() {
				due = time.Now().UTC()
			}
			ds = append(ds, store.Delivery{ID: n.DeliveryID, ConfirmationID: p.ID, Channel: ch, Kind: KindProposal, Payload: b, DueAt: due})
		}
	}
	if _, err := o.Store.EnqueueDeliveries(ctx, ds); err != nil {
		return fmt.Errorf("notify: enqueue proposal notices: %w", err)
	}
	return nil
}

// Decided enqueues, once per channel, the notice that confirmation c (as stored, decided) was
// decided (KindDecided) or expired (KindExpired), to the channels told of it: the routes'
// channels and their escalation channels. The notice's presentation is read again when it is
// sent (the execution's outcome included). An undecided c enqueues nothing. Idempotent by
// delivery id: the activity that records the decision calls it on every attempt.
func (o *Outbox) Decided(ctx context.Context, c store.Confirmation) error {
	kind := KindDecided
	switch c.Decision {
	case store.DecisionApproved, store.DecisionDenied:
	case store.DecisionExpired:
		kind = KindExpired
	default:
		return nil
	}
	f, _, err := o.Source.Current()
	if err != nil && o.Log != nil {
		o.Log.Warn("notify file", "error", err)
	}
	if f == nil {
		return nil
	}
	plan := f.PlanFor(c.CapabilityID, c.ApproverGroups)
	chans := append([]string{}, plan.Now...)
	for _, ch := range sortedKeys(plan.Escalate) {
		if !slices.Contains(chans, ch) {
			chans = append(chans, ch)
		}
	}
	at := c.CreatedAt
	if c.DecidedAt != nil {
		at = *c.DecidedAt
	}
	var ds []store.Delivery
	for _, ch := range chans {
		n := Build(c, kind, ch, f.BaseURL)
		b, err := json.Marshal(n)
		if err != nil {
			return fmt.Errorf("notify: encode notice: %w", err)
		}
		ds = append(ds, store.Delivery{ID: n.DeliveryID, ConfirmationID: c.ID, Channel: ch, Kind: kind, Payload: b, DueAt: at})
	}
	if _, err := o.Store.EnqueueDeliveries(ctx, ds); err != nil {
		return fmt.Errorf("notify: enqueue %s notices of %s: %w", kind, c.ID, err)
	}
	return nil
}

// MCPChanged enqueues the notice that a pinned MCP tool left its pin, once per tool and live
// digest (subject: the change's key), to the channels of the routes that match its capability
// id or "mcp_tool_changed" (a route with capabilities: [mcp_tool_changed] gets only these).
func (o *Outbox) MCPChanged(ctx context.Context, ch MCPToolChange, subject, capabilityID string, at time.Time) error {
	f, _, err := o.Source.Current()
	if err != nil && o.Log != nil {
		o.Log.Warn("notify file", "error", err)
	}
	if f == nil {
		return nil
	}
	chans := f.PlanFor(capabilityID, nil).Now
	for _, c := range f.PlanFor(KindMCPToolChanged, nil).Now {
		if !slices.Contains(chans, c) {
			chans = append(chans, c)
		}
	}
	var ds []store.Delivery
	for _, name := range chans {
		n := BuildMCP(ch, subject, name, at)
		b, err := json.Marshal(n)
		if err != nil {
			return fmt.Errorf("notify: encode notice: %w", err)
		}
		ds = append(ds, store.Delivery{ID: n.DeliveryID, ConfirmationID: subject, Channel: name, Kind: KindMCPToolChanged, Payload: b, DueAt: at.UTC()})
	}
	if _, err := o.Store.EnqueueDeliveries(ctx, ds); err != nil {
		return fmt.Errorf("notify: enqueue MCP change notices: %w", err)
	}
	return nil
}

// Deliveries are the outbox rows f routes for confirmation c (see Outbox.Pending).
func Deliveries(f *File, c store.Confirmation) ([]store.Delivery, error) {
	plan := f.PlanFor(c.CapabilityID, c.ApproverGroups)
	created := c.CreatedAt
	if created.IsZero() {
		created = time.Now().UTC()
	}
	ttl := c.ExpiresAt.Sub(created)
	var out []store.Delivery
	add := func(kind, ch string, due time.Time) error {
		n := Build(c, kind, ch, f.BaseURL)
		// No buttons where the capability is decided only with a passkey (issue 21, item 3):
		// Slack cannot carry one, so a button could never decide.
		if cc, ok := f.Channel(ch); ok && cc.Type == "slack" && f.SlackDecides(c.CapabilityID) && !c.PasskeyRequired {
			n.Decide = c.ID + "|" + c.ArgsDigest
		}
		b, err := json.Marshal(n)
		if err != nil {
			return fmt.Errorf("notify: encode notice: %w", err)
		}
		out = append(out, store.Delivery{ID: n.DeliveryID, ConfirmationID: c.ID, Channel: ch, Kind: kind, Payload: b, DueAt: due})
		return nil
	}
	for _, ch := range plan.Now {
		if err := add(KindPending, ch, created); err != nil {
			return nil, err
		}
	}
	for _, kind := range []string{KindReminder, KindEscalation} {
		m := plan.Remind
		if kind == KindEscalation {
			m = plan.Escalate
		}
		for _, ch := range sortedKeys(m) {
			if ttl <= 0 {
				continue
			}
			if err := add(kind, ch, created.Add(time.Duration(float64(ttl)*m[ch]))); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func sortedKeys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sortStrings(out)
	return out
}
