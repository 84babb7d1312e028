package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/airlock-dev/airlock/internal/stream"
)

// AG-UI event types of a turn's stream (StreamEvent.Type; https://docs.ag-ui.com/concepts/events).
// Which step writes which is listed in docs/app-developers.md ("Streaming a turn").
const (
	EventRunStarted         = stream.RunStarted
	EventRunFinished        = stream.RunFinished // outcome "success" (result: the TurnResult) or "interrupt" (pending confirmations)
	EventRunError           = stream.RunError
	EventTextMessageStart   = stream.TextMessageStart
	EventTextMessageContent = stream.TextMessageContent
	EventTextMessageEnd     = stream.TextMessageEnd
	EventToolCallStart      = stream.ToolCallStart
	EventToolCallArgs       = stream.ToolCallArgs
	EventToolCallEnd        = stream.ToolCallEnd
	EventCustom             = stream.Custom
)

// Names of the CUSTOM events (the "name" member of their Data).
const (
	CustomConfirmationPending = stream.ConfirmationPending // value: what the approver card shows
	CustomDecided             = stream.Decided
	CustomExecuted            = stream.Executed
	CustomRefused             = stream.Refused
	CustomCaptured            = stream.Captured // an agent proposal captured for a human decision
)

// StreamEvent is one event of a turn's stream. ID is its event id (1, 2, … per turn; resume
// after the last one seen), 0 for the RUN_FINISHED interrupt events the follower makes while
// confirmations are pending (not resumable: they are made again on reconnect). Data is the
// whole AG-UI event as JSON. Text in it (deltas, arguments, the approver card) was written by
// a model: hostile, show it escaped.
type StreamEvent struct {
	ID   int64           `json:"id"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// StreamOptions tune Stream. Poll is how often the store is read while the stream is idle
// (default 50 ms).
type StreamOptions struct {
	Poll time.Duration
}

// Stream hands fn the events of the turn after event id after (0: from the start), in order,
// while the turn runs, and returns nil after its final event (RUN_FINISHED with outcome
// success, or RUN_ERROR). A client that reconnects passes the last ID it saw; one that
// reconnects after the end gets the final event again; pending confirmations whose events
// came before after are announced again in a RUN_FINISHED interrupt event (ID 0). Events
// live in the Airlock store, not in Temporal history, so the Client needs Options.DatabaseURL.
//
// Errors: ErrNotConfigured without a store; ctx's error (the turn is still running when ctx
// ends); fn's error; the store's.
//
// In API mode (Options.APIURL) the events come from the API's event stream instead: the same
// AG-UI events in their 1.0 shapes (RUN_FINISHED's outcome an object, threadId and runId set,
// TOOL_CALL_RESULT after each outcome), and pending confirmations as CUSTOM airlock.interrupt
// events (ID 0).
func (t *Turn) Stream(ctx context.Context, after int64, opts StreamOptions, fn func(StreamEvent) error) error {
	if t.c.api != nil {
		return t.c.api.stream(ctx, t.ID, after, fn)
	}
	if t.c.st == nil {
		return fmt.Errorf("%w: Stream needs Options.DatabaseURL (the events are in the Airlock store)", ErrNotConfigured)
	}
	return stream.Follow(ctx, t.c.st, t.ID, after, opts.Poll, func(d stream.Delivered) error {
		return fn(StreamEvent{ID: d.Seq, Type: d.Type, Data: d.Payload})
	})
}
