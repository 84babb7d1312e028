package client

import (
	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/presentation"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workflows"
)

// TurnRequest starts one turn: the conversation, the principal the turn acts for, the user's
// message and the turn's limits (see workflows.TurnRequest for every field).
type TurnRequest = workflows.TurnRequest

// TurnResult is what a turn returns: the model's prose, citations, structured capability
// results, every proposal's outcome, the rounds and the token usage.
type TurnResult = workflows.TurnResult

// ProposalOutcome is what happened to one tool call the model proposed.
type ProposalOutcome = workflows.ProposalOutcome

// CapabilityResult is one executed capability's structured result (untrusted data).
type CapabilityResult = workflows.CapabilityResult

// Citation is a source a capability retrieved (URL, final URL, title, content, time).
type Citation = registry.Citation

// Usage is the model tokens a turn used.
type Usage = workflows.Usage

// PendingConfirmation is one call waiting for a human decision (never its token). Arguments
// are the model's, hostile: show them with care (the approver page and the CLI use
// internal/display). ArgsDigest is what a decision names as the arguments it was made on.
type PendingConfirmation = workflows.PendingConfirmation

// Presentation is the one presentation of a confirmation every approver surface shares
// (package presentation): capability, description, destination and what leaves, arguments,
// provenance, the user's request, requester, groups and quorum with votes so far, expiry and
// status, each hostile string already made visible. Its JSON is the application API's
// "presentation" object and the webhook notices' "confirmation".
type Presentation = presentation.Confirmation

// DecisionResult is the turn's answer to a decision: accepted, or refused with a code.
type DecisionResult = workflows.DecisionResult

// Outcome is the final disposition of one proposal.
type Outcome = activities.Outcome

// Stage is the executor stage an outcome happened at.
type Stage = activities.Stage

// Outcomes (DESIGN vocabulary).
const (
	OutcomeExecuted        = activities.OutcomeExecuted
	OutcomeRejected        = activities.OutcomeRejected
	OutcomeDenied          = activities.OutcomeDenied
	OutcomeExpired         = activities.OutcomeExpired
	OutcomeParseFailed     = activities.OutcomeParseFailed
	OutcomeBudgetExhausted = activities.OutcomeBudgetExhausted
	OutcomeCaptured        = activities.OutcomeCaptured
	// OutcomeUnknown: an effect started and its result was lost (a crash mid-execute); it
	// was not run again.
	OutcomeUnknown = activities.OutcomeUnknown
	// OutcomeFailed: the capability ran and returned an error.
	OutcomeFailed = activities.OutcomeFailed
)

// Turn statuses (TurnResult.Status and the AirlockStatus search attribute).
const (
	StatusRunning              = workflows.StatusRunning
	StatusAwaitingConfirmation = workflows.StatusAwaitingConfirmation
	StatusCompleted            = workflows.StatusCompleted
	StatusFailed               = workflows.StatusFailed
)

// Decisions an approver may make.
const (
	Approve = workflows.DecisionApprove
	Deny    = workflows.DecisionDeny
)

// TaskQueue is the default task queue of turns.
const TaskQueue = workflows.TaskQueue

// Visible returns model-written text fit to show on one line: control, bidirectional and
// invisible characters (and bytes that are not UTF-8) as <U+XXXX> (<0xXX>), everything else
// as is. Show tool names, arguments, reasons and details with it.
func Visible(s string) string { return display.Visible(s) }

// Text is Visible for multi-line text (the model's prose): newlines and tabs stay.
func Text(s string) string { return display.Text(s) }
