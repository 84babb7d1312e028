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
