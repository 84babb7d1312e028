// Package stream is a turn's event stream for client apps (issue 22 item 2): while a turn
// runs, its activities append AG-UI events (https://docs.ag-ui.com/concepts/events) to the
// store's stream_events table, outside Temporal history, and clients follow them over
// server-sent events (Handler) or the Go client (client.Turn.Stream), resuming after the last
// event id they saw.
//
// Events and who writes them:
//
//	RUN_STARTED            the first Infer of the turn
//	TEXT_MESSAGE_START     Infer, at the first text delta of a round's answer
//	TEXT_MESSAGE_CONTENT   Infer, one per text delta
//	TEXT_MESSAGE_END       Infer, when the answer's stream ended
//	TOOL_CALL_START/ARGS/END  Infer, as the model streams a call (display only: no call is
//	                       acted on before its message is complete and parsed)
//	CUSTOM airlock.confirmation_pending  IssueConfirmation: what the approver card shows
//	CUSTOM airlock.decided               Record of a confirmation's decision
//	CUSTOM airlock.executed / airlock.refused / airlock.captured  Record of each outcome
//	RUN_FINISHED           FinishTurn (outcome "success", result: the TurnResult)
//	RUN_ERROR              FinishTurn of a failed turn
//	RUN_FINISHED outcome "interrupt"  not stored: the follower sends it whenever the stream
//	                       is idle while confirmations are pending, listing them, also to a
//	                       client that reconnects after their pending events
//
// Writes are best effort: the durable record of a turn is its history and the store's audit;
// an event that cannot be written is logged, never fails the turn.
package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/airlock-dev/airlock/internal/store"
)

// AG-UI event types Airlock writes.
const (
	RunStarted         = "RUN_STARTED"
	RunFinished        = "RUN_FINISHED"
	RunError           = "RUN_ERROR"
	TextMessageStart   = "TEXT_MESSAGE_START"
	TextMessageContent = "TEXT_MESSAGE_CONTENT"
	TextMessageEnd     = "TEXT_MESSAGE_END"
	ToolCallStart      = "TOOL_CALL_START"
	ToolCallArgs       = "TOOL_CALL_ARGS"
	ToolCallEnd        = "TOOL_CALL_END"
	Custom             = "CUSTOM"
)

// CUSTOM event names (Event.Name).
const (
	// ConfirmationPending: a proposal waits for a human; Value is a Pending.
	ConfirmationPending = "airlock.confirmation_pending"
	// Decided: a confirmation was decided; Value is a Decided.
	Decided = "airlock.decided"
	// Executed: a proposal ran; Value is an Outcome.
	Executed = "airlock.executed"
	// Refused: a proposal did not run (rejected at a stage, denied, expired, parse failure,
	// budget exhausted, outcome unknown, ...); Value is an Outcome.
	Refused = "airlock.refused"
	// Captured: an agent proposal (memory change, self-correction, focus declaration) was
	// captured as an inert record awaiting a human decision; Value is an Outcome.
	Captured = "airlock.captured"
)

// Event is one AG-UI event as Airlock writes it (the JSON field names are AG-UI's). Only the
// fields of its Type are set.
type Event struct {
	Type            string          `json:"type"`
	Timestamp       int64           `json:"timestamp,omitempty"` // Unix milliseconds
	ThreadID        string          `json:"threadId,omitempty"`  // the conversation
	RunID           string          `json:"runId,omitempty"`     // the turn's workflow id
	MessageID       string          `json:"messageId,omitempty"`
	Role            string          `json:"role,omitempty"`
	Delta           string          `json:"delta,omitempty"`
	ToolCallID      string          `json:"toolCallId,omitempty"`
	ToolCallName    string          `json:"toolCallName,omitempty"`
	ParentMessageID string          `json:"parentMessageId,omitempty"`
	Name            string          `json:"name,omitempty"`  // CUSTOM
	Value           json.RawMessage `json:"value,omitempty"` // CUSTOM
	Outcome         string          `json:"outcome,omitempty"`
	Result          json.RawMessage `json:"result,omitempty"`
	Interrupts      []Interrupt     `json:"interrupts,omitempty"`
	Message         string          `json:"message,omitempty"` // RUN_ERROR
	Code            string          `json:"code,omitempty"`
}

// Interrupt is one pending confirmation in a RUN_FINISHED event with outcome "interrupt".
type Interrupt struct {
	ID      string  `json:"id"` // the confirmation id
	Reason  string  `json:"reason"`
	Payload Pending `json:"payload"`
}

// Pending is the value of airlock.confirmation_pending: what the approver card shows. Display
// and Arguments were written by the model: hostile text, to be shown escaped
// (internal/display) by whoever renders them.
type Pending struct {
	ConfirmationID string          `json:"confirmationId"`
	Seq            int             `json:"seq"`
	CallID         string          `json:"callId,omitempty"`
	Capability     string          `json:"capability"`
	Version        int             `json:"version"`
	ArgsDigest     string          `json:"argsDigest"`
	Arguments      json.RawMessage `json:"arguments,omitempty"`
	Display        string          `json:"display,omitempty"`
	ExpiresAt      time.Time       `json:"expiresAt"`
}

// DecidedValue is the value of airlock.decided.
type DecidedValue struct {
	ConfirmationID string `json:"confirmationId"`
	Decision       string `json:"decision"` // approved | denied | expired
	Approver       string `json:"approver,omitempty"`
}

// Outcome is the value of airlock.executed and airlock.refused.
type Outcome struct {
	Seq        int    `json:"seq"`
	CallID     string `json:"callId,omitempty"`
	Capability string `json:"capability,omitempty"`
	Version    int    `json:"version,omitempty"`
	Outcome    string `json:"outcome"`
	Stage      string `json:"stage,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// Writer appends events to the store. The zero Writer (nil Store) writes nothing.
type Writer struct {
	Store *store.Store
	Log   *slog.Logger
	Now   func() time.Time
}

// Emit appends ev to the stream of turn (its workflow id) under dedup (retries of one step
// pass the same dedup and write one event). Failures are logged, never returned: see the
// package comment.
func (w Writer) Emit(ctx context.Context, turn, dedup string, ev Event) {
	if w.Store == nil || turn == "" {
		return
	}
	now := time.Now()
	if w.Now != nil {
		now = w.Now()
	}
	if ev.Timestamp == 0 {
		ev.Timestamp = now.UnixMilli()
	}
	b, err := json.Marshal(ev)
	if err == nil {
		_, err = w.Store.AppendStreamEvent(ctx, turn, dedup, ev.Type, b, now)
	}
	if err != nil {
		log := w.Log
		if log == nil {
			log = slog.Default()
		}
		log.Warn("stream event not written", "turn", turn, "type", ev.Type, "error", err)
	}
}

// CustomEvent builds a CUSTOM event with a JSON value.
func CustomEvent(name string, value any) Event {
	b, err := json.Marshal(value)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"error":%q}`, err.Error()))
	}
	return Event{Type: Custom, Name: name, Value: b}
}
