package stream

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/parse"
	"github.com/airlock-dev/airlock/internal/store"
)

// Round writes the events of one streamed answer (one attempt of one inference round). Its
// message id is "<turn>/r<round>/a<attempt>", so a retried round streams as a new message.
type Round struct {
	ctx      context.Context
	w        Writer
	turn     string
	msgID    string
	n        int
	textOpen bool
	calls    map[int]string // call position → tool call id shown
	order    []int
}

// Round starts the events of round (1-based) attempt (1-based) of turn.
func (w Writer) Round(ctx context.Context, turn string, round int, attempt int32) *Round {
	return w.RoundAsk(ctx, turn, round, attempt, 1)
}

// RoundAsk is Round for the ask-th asking of the round within one attempt (Infer asks a round
// again with a stored snapshot's offer): ask 1 is Round's message, a later ask a message of
// its own ("<turn>/r<round>/a<attempt>.<ask>"), so its events never share the dedup keys of
// an earlier ask's (the store would drop them as repeats).
func (w Writer) RoundAsk(ctx context.Context, turn string, round int, attempt int32, ask int) *Round {
	id := fmt.Sprintf("%s/r%d/a%d", turn, round, attempt)
	if ask > 1 {
		id = fmt.Sprintf("%s.%d", id, ask)
	}
	return &Round{ctx: ctx, w: w, turn: turn, msgID: id, calls: map[int]string{}}
}

func (r *Round) emit(ev Event) {
	r.n++
	r.w.Emit(r.ctx, r.turn, fmt.Sprintf("%s/%d", r.msgID, r.n), ev)
}

// Sink is the inference.Sink that turns deltas into TEXT_MESSAGE_* and TOOL_CALL_* events.
func (r *Round) Sink() inference.Sink {
	return func(d parse.Delta) {
		switch d.Kind {
		case parse.DeltaText:
			if !r.textOpen {
				r.textOpen = true
				r.emit(Event{Type: TextMessageStart, MessageID: r.msgID, Role: "assistant"})
			}
			r.emit(Event{Type: TextMessageContent, MessageID: r.msgID, Delta: d.Text})
		case parse.DeltaCallStart:
			id := d.ID
			if id == "" {
				id = fmt.Sprintf("%s/c%d", r.msgID, d.Call)
			}
			r.calls[d.Call] = id
			r.order = append(r.order, d.Call)
			r.emit(Event{Type: ToolCallStart, ToolCallID: id, ToolCallName: d.Name, ParentMessageID: r.msgID})
		case parse.DeltaCallArgs:
			id, ok := r.calls[d.Call]
			if !ok {
				return // args of a call whose start was not seen: nothing to attach them to
			}
			r.emit(Event{Type: ToolCallArgs, ToolCallID: id, Delta: d.Text})
		}
	}
}

// End closes what the answer opened: TEXT_MESSAGE_END and one TOOL_CALL_END per call.
func (r *Round) End() {
	if r.textOpen {
		r.emit(Event{Type: TextMessageEnd, MessageID: r.msgID})
	}
	for _, c := range r.order {
		r.emit(Event{Type: ToolCallEnd, ToolCallID: r.calls[c]})
	}
}

// DefaultPoll is how often a follower reads the store while the stream is idle: it bounds the
// latency the store adds between a written event and its delivery.
const DefaultPoll = 50 * time.Millisecond

// Delivered is one event handed to a follower: Seq 0 for an event the follower made (the
// interrupt), which carries no id and is not resumed after.
type Delivered struct {
	Seq     int64
	Type    string
	Payload json.RawMessage
}

// IsFinal reports whether an event ends the stream: RUN_ERROR, or RUN_FINISHED other than an
// interrupt.
func IsFinal(typ string, payload json.RawMessage) bool {
	if typ == RunError {
		return true
	}
	if typ != RunFinished {
		return false
	}
	var ev struct {
		Outcome string `json:"outcome"`
	}
	_ = json.Unmarshal(payload, &ev)
	return ev.Outcome != "interrupt"
}

// Follow hands the events of turn with Seq > after to fn in order, polling the store every
// poll (DefaultPoll when 0), and returns nil after the final event (RUN_FINISHED, RUN_ERROR). When
// the final event is at or before after, it is handed again: a client that reconnects after
// the end gets the final result. Whenever the stream is idle while confirmations are pending
// (pending events, from the start of the stream, without their decided event), it hands a
// RUN_FINISHED with outcome "interrupt" listing them (Seq 0), once per change, leaving out
// those the store holds a decision for (Undecided): a client that reconnects after their
// pending events sees them again.
//
// Errors: ctx's error, fn's error, or the store's.
func Follow(ctx context.Context, st *store.Store, turn string, after int64, poll time.Duration, fn func(Delivered) error) error {
	if poll <= 0 {
		poll = DefaultPoll
	}
	tr := NewTracker()
	if err := tr.Seen(ctx, st, turn, after); err != nil {
		return err
	}
	if tr.Final != nil {
		return fn(Delivered{Seq: tr.Final.Seq, Type: tr.Final.Type, Payload: tr.Final.Payload})
	}
	cursor := after
	interrupted := ""
	for {
		evs, err := st.StreamEvents(ctx, turn, cursor, 0)
		if err != nil {
			return err
		}
		for _, e := range evs {
			tr.Track(e)
			cursor = e.Seq
			if err := fn(Delivered{Seq: e.Seq, Type: e.Type, Payload: e.Payload}); err != nil {
				return err
			}
			if tr.Final != nil {
				return nil
			}
		}
		if len(evs) == store.MaxStreamPage {
			continue
		}
		if key := tr.PendingKey(); key != interrupted {
			interrupted = key
			open, err := Undecided(ctx, st, tr.SortedPending())
			if err != nil {
				return err
			}
			if len(open) > 0 {
				if err := fn(interruptEvent(turn, open)); err != nil {
					return err
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// interruptEvent is the RUN_FINISHED "interrupt" event (Seq 0) listing pending, in order.
func interruptEvent(turn string, pending []Pending) Delivered {
	ev := Event{Type: RunFinished, RunID: turn, Outcome: "interrupt", Timestamp: time.Now().UnixMilli()}
	for _, p := range pending {
		ev.Interrupts = append(ev.Interrupts, Interrupt{ID: p.ConfirmationID, Reason: "confirmation_required", Payload: p})
	}
	b, _ := json.Marshal(ev) // a struct of strings, numbers and raw JSON objects always encodes
	return Delivered{Type: RunFinished, Payload: b}
}

// Handler serves GET ?turn=<workflow id> as server-sent events: each stored event as "id:
// <seq>", "event: <AG-UI type>" and "data: <the AG-UI event>", the follower's interrupt
// events without an id, a comment every 15 s to keep proxies from closing the connection, and
// the end of the response after the final event. A client resumes with the Last-Event-ID
// header (as EventSource sends it) or ?after=<seq>.
//
// Every request needs "Authorization: Bearer <token>" (compared in constant time); token must
// not be empty. Errors: 401 without the token, 400 for a missing turn or a bad resume id, 405
// for other methods.
func Handler(st *store.Store, token string, poll time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if token == "" || !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="airlock-stream"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		turn := r.URL.Query().Get("turn")
		if turn == "" {
			http.Error(w, "missing ?turn=<workflow id>", http.StatusBadRequest)
			return
		}
		resume := r.Header.Get("Last-Event-ID")
		if resume == "" {
			resume = r.URL.Query().Get("after")
		}
		var after int64
		if resume != "" {
			n, err := strconv.ParseInt(resume, 10, 64)
			if err != nil || n < 0 {
				http.Error(w, "Last-Event-ID / after must be a non-negative event id", http.StatusBadRequest)
				return
			}
			after = n
		}
		fl, ok := w.(http.Flusher)
		if !ok {
			http.Error(w, "streaming unsupported", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
		_, _ = fmt.Fprint(w, "retry: 1000\n\n")
		fl.Flush()
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		var mu sync.Mutex // the keep-alive and the events share the connection
		write := func(s string) error {
			mu.Lock()
			defer mu.Unlock()
			if _, err := fmt.Fprint(w, s); err != nil {
				return err
			}
			fl.Flush()
			return nil
		}
		go func() {
			t := time.NewTicker(15 * time.Second)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if write(": keep-alive\n\n") != nil {
						cancel()
						return
					}
				}
			}
		}()
		err := Follow(ctx, st, turn, after, poll, func(d Delivered) error {
			var b strings.Builder
			if d.Seq > 0 {
				fmt.Fprintf(&b, "id: %d\n", d.Seq)
			}
			fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", d.Type, d.Payload)
			return write(b.String())
		})
		cancel()
		mu.Lock()
		defer mu.Unlock()
		if err != nil && !errors.Is(err, context.Canceled) {
			_, _ = fmt.Fprintf(w, ": error: %s\n\n", strings.ReplaceAll(err.Error(), "\n", " "))
			fl.Flush()
		}
	})
}
