package stream

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"

	"github.com/airlock-dev/airlock/internal/store"
)

// Tracker is what a follower that may resume must know of a turn's stream beyond the events
// it delivers: the confirmations still pending (a ConfirmationPending event without its
// Decided event) and the final event (IsFinal), once seen. Both followers of a stream use it:
// Follow (airlock stream) and the application API's AG-UI events.
type Tracker struct {
	// Pending maps a confirmation id to its pending event's value.
	Pending map[string]Pending
	// Final is the final event, nil until one is tracked.
	Final *store.StreamEvent
}

// NewTracker returns a Tracker that has seen nothing.
func NewTracker() *Tracker { return &Tracker{Pending: map[string]Pending{}} }

// Track takes one stored event into account, in stream order. Events that do not decode are
// delivered all the same by the follower; they change nothing here.
func (t *Tracker) Track(e store.StreamEvent) {
	if e.Type == Custom {
		var ev Event
		if json.Unmarshal(e.Payload, &ev) == nil {
			switch ev.Name {
			case ConfirmationPending:
				var p Pending
				if json.Unmarshal(ev.Value, &p) == nil {
					t.Pending[p.ConfirmationID] = p
				}
			case Decided:
				var d DecidedValue
				if json.Unmarshal(ev.Value, &d) == nil {
					delete(t.Pending, d.ConfirmationID)
				}
			}
		}
	}
	if IsFinal(e.Type, e.Payload) {
		ec := e
		t.Final = &ec
	}
}

// Seen tracks the events of turn up to and including seq after, the ones a resuming client
// saw already: only its pending confirmations and the end matter of them. Errors: the store's.
func (t *Tracker) Seen(ctx context.Context, st *store.Store, turn string, after int64) error {
	var cursor int64
	for cursor < after {
		evs, err := st.StreamEvents(ctx, turn, cursor, 0)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if e.Seq > after {
				return nil
			}
			t.Track(e)
			cursor = e.Seq
		}
		if len(evs) < store.MaxStreamPage {
			return nil
		}
	}
	return nil
}

// PendingKey names the set of pending confirmations (their sorted ids): a follower announces
// an interrupt once per change of it.
func (t *Tracker) PendingKey() string {
	ids := t.pendingIDs()
	return strings.Join(ids, ",")
}

// SortedPending is the pending confirmations ordered by id.
func (t *Tracker) SortedPending() []Pending {
	ids := t.pendingIDs()
	out := make([]Pending, len(ids))
	for i, id := range ids {
		out[i] = t.Pending[id]
	}
	return out
}

func (t *Tracker) pendingIDs() []string {
	ids := make([]string, 0, len(t.Pending))
	for id := range t.Pending {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Undecided is pending without the confirmations the store already holds a decision for: the
// stream says a confirmation was decided only once the turn took the decision, so a follower
// must not announce, as still waiting, one an approver answered a moment ago (an AG-UI resume
// would end on the very question it answered). A confirmation the store does not know stays
// (the stream says it waits). Errors are the store's.
func Undecided(ctx context.Context, st *store.Store, pending []Pending) ([]Pending, error) {
	var open []Pending
	for _, p := range pending {
		row, err := st.GetConfirmation(ctx, p.ConfirmationID)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return nil, err
		case row.Decision != "":
			continue
		}
		open = append(open, p)
	}
	return open, nil
}
