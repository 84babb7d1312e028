package activities

import (
	"context"

	"github.com/airlock-dev/airlock/internal/store"
)

// Notifier owes approvers a notice of a confirmation just issued (issue 23): notify.Outbox,
// which writes it to the store's outbox for the worker's dispatcher to deliver. Pending is
// called on every attempt of IssueConfirmation with the row as stored and must be idempotent
// by confirmation id; it only writes the outbox (never sends), so no channel delays a turn.
type Notifier interface {
	Pending(ctx context.Context, c store.Confirmation) error
}

// ProposalNotifier, when the Notifier implements it, owes approvers a notice of the agent
// proposals SettleProposals just stored (notify.Outbox), on every attempt, idempotently.
type ProposalNotifier interface {
	Proposals(ctx context.Context, ps []store.ProposalRow) error
}

// DecisionNotifier, when the Notifier implements it, owes the channels told of a confirmation a
// notice of its decision or expiry (notify.Outbox.Decided): called with the row as stored
// after the activity that records the decision wrote it, on every attempt, idempotently (one
// notice per confirmation, kind and channel), so a crash between the two loses nothing.
type DecisionNotifier interface {
	Decided(ctx context.Context, c store.Confirmation) error
}
