package appapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/present"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/stream"
	"github.com/airlock-dev/airlock/presentation"
)

// hub wakes the followers of a stream when the store signals it (store.WatchStreams): one
// LISTEN connection for the whole process, so a follower costs no store reads while its turn
// is idle. Without notifications (SQLite) followers poll every pollInterval.
type hub struct {
	mu        sync.Mutex
	subs      map[string]map[chan struct{}]struct{}
	listening bool
}

// pollInterval is how often a follower reads the store when no notifications are available.
const pollInterval = 200 * time.Millisecond

func newHub(ctx context.Context, st *store.Store) *hub {
	h := &hub{subs: map[string]map[chan struct{}]struct{}{}}
	h.listening = st.WatchStreams(ctx, h.note)
	return h
}

func (h *hub) note(streamID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	wake := func(set map[chan struct{}]struct{}) {
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	if streamID == "" {
		for _, set := range h.subs {
			wake(set)
		}
		return
	}
	wake(h.subs[streamID])
}

// subscribe returns a channel (capacity 1) that receives whenever streamID may have new
// events, and its cancel. Subscribe before reading the store: no change is missed.
func (h *hub) subscribe(streamID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if h.subs[streamID] == nil {
		h.subs[streamID] = map[chan struct{}]struct{}{}
	}
	h.subs[streamID][ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs[streamID], ch)
		if len(h.subs[streamID]) == 0 {
			delete(h.subs, streamID)
		}
		h.mu.Unlock()
	}
}

// settle is how long a follower waits, idle with confirmations pending, before it announces
// them: the other calls of the same round have time to be written first.
const settle = 150 * time.Millisecond

// errIdle ends a stream that saw no event for Options.StreamIdle.
var errIdle = errors.New("appapi: stream idle")

// follow hands emit the stored events of turn after `after`, in order, then waits (on the hub)
// for more, until the turn's final event (RUN_FINISHED success or RUN_ERROR: delivered, even
// to a follower that resumes after it) or, when interruptEnds, the first moment the turn is
// idle with confirmations pending: then interrupt is called with them and follow returns.
// Without interruptEnds, interrupt is called once per change of the pending set and the
// stream goes on. Returns nil at the end, errIdle after StreamIdle without events, ctx's or
// emit's error, or the store's.
func (s *Server) follow(ctx context.Context, turn string, after int64, interruptEnds bool,
	emit func(store.StreamEvent) error, interrupt func([]stream.Pending) error) error {
	wake, unsub := s.hub.subscribe(turn)
	defer unsub()
	tr := stream.NewTracker()
	if err := tr.Seen(ctx, s.opt.Store, turn, after); err != nil {
		return err
	}
	if tr.Final != nil {
		return emit(*tr.Final)
	}
	cursor := after
	announced := ""
	lastEvent := time.Now()
	for {
		evs, err := s.opt.Store.StreamEvents(ctx, turn, cursor, 0)
		if err != nil {
			return err
		}
		for _, e := range evs {
			tr.Track(e)
			cursor = e.Seq
			lastEvent = time.Now()
			if err := emit(e); err != nil {
				return err
			}
			if tr.Final != nil {
				return nil
			}
		}
		if len(evs) == store.MaxStreamPage {
			continue
		}
		wait := s.opt.StreamIdle - time.Since(lastEvent)
		if len(tr.Pending) > 0 && tr.PendingKey() != announced {
			// Idle with confirmations pending: announce them once the round has settled.
			wait = settle
		}
		if !s.hub.listening && wait > pollInterval {
			wait = pollInterval
		}
		if wait <= 0 {
			return errIdle
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-wake:
			t.Stop()
			continue
		case <-t.C:
		}
		if len(tr.Pending) > 0 && tr.PendingKey() != announced {
			// No event arrived within settle: the turn waits for these.
			evs, err := s.opt.Store.StreamEvents(ctx, turn, cursor, 1)
			if err != nil {
				return err
			}
			if len(evs) > 0 {
				continue // something arrived after all: deliver it first
			}
			announced = tr.PendingKey()
			open, err := stream.Undecided(ctx, s.opt.Store, tr.SortedPending())
			if err != nil {
				return err
			}
			if len(open) == 0 {
				// Every one is decided already (a resume just answered it; the turn has not
				// yet written that it took the decision): its outcome is on its way.
				continue
			}
			if err := interrupt(open); err != nil {
				return err
			}
			if interruptEnds {
				return nil
			}
		}
	}
}

// agui turns one stored event into AG-UI 1.0 events as @ag-ui/core's schemas define them:
// threadId and runId on run events, RUN_FINISHED's outcome an object, and a TOOL_CALL_RESULT
// (its content a JSON text marked untrusted, every non-ASCII character escaped) after each
// outcome of a call the model named. The stored RUN_STARTED is dropped when dropStarted (the
// AG-UI endpoint opens each response with its own).
func agui(e store.StreamEvent, thread, run string, dropStarted bool) []map[string]any {
	var ev map[string]any
	if err := json.Unmarshal(e.Payload, &ev); err != nil || ev == nil {
		return nil
	}
	switch e.Type {
	case stream.RunStarted:
		if dropStarted {
			return nil
		}
		ev["threadId"], ev["runId"] = thread, run
	case stream.RunFinished:
		ev["threadId"], ev["runId"] = thread, run
		ev["outcome"] = map[string]any{"type": "success"}
		delete(ev, "interrupts")
	case stream.RunError:
		if m, _ := ev["message"].(string); m == "" {
			ev["message"] = "the turn failed"
		}
		delete(ev, "runId")
	case stream.Custom:
		name, _ := ev["name"].(string)
		if name != stream.Executed && name != stream.Refused && name != stream.Captured {
			break
		}
		raw, _ := json.Marshal(ev["value"])
		var o stream.Outcome
		if json.Unmarshal(raw, &o) != nil || o.CallID == "" {
			break
		}
		content, _ := json.Marshal(map[string]any{"untrusted": true, "source": "airlock", "capability": o.Capability,
			"version": o.Version, "outcome": o.Outcome, "stage": o.Stage, "reason": o.Reason})
		res := map[string]any{"type": "TOOL_CALL_RESULT", "messageId": run + "/result/" + strconv.FormatInt(e.Seq, 10),
			"toolCallId": o.CallID, "role": "tool", "content": asciiJSON(content)}
		if ts, ok := ev["timestamp"]; ok {
			res["timestamp"] = ts
		}
		return []map[string]any{ev, res}
	}
	return []map[string]any{ev}
}

// interruptOutcome is RUN_FINISHED's interrupt outcome for pending (AG-UI 1.0 Interrupt
// objects): the confirmation id as the interrupt id, the call's id, its expiry, what a resume
// must carry (responseSchema), and under metadata.airlock the card (hostile text: escaped)
// and whether this caller may decide it and who may.
func (s *Server) interruptOutcome(ctx context.Context, c Caller, pending []stream.Pending) map[string]any {
	set, _ := s.approvers()
	var list []any
	for _, p := range pending {
		may, why := false, "the confirmation is no longer pending"
		who := "an approver other than the turn's requester"
		var shown *presentation.Confirmation
		if row, err := s.opt.Store.GetConfirmation(ctx, p.ConfirmationID); err == nil {
			owner, _ := s.opt.Store.TurnOwner(ctx, row.WorkflowID)
			may, why = s.mayDecide(row, c, owner, set)
			who = whoMayDecide(row)
			if pc, err := present.Present(ctx, s.opt.Store, row, c.Approver, time.Now()); err == nil {
				shown = &pc // the one presentation every approver surface shows
			}
		}
		it := map[string]any{
			"id":        p.ConfirmationID,
			"reason":    "confirmation_required",
			"message":   fmt.Sprintf("%s@%d needs an approver's decision", display.Visible(p.Capability), p.Version),
			"expiresAt": p.ExpiresAt.UTC().Format(time.RFC3339),
			"responseSchema": map[string]any{"type": "object", "required": []string{"decision"}, "properties": map[string]any{
				"decision":   map[string]any{"enum": []string{"approve", "deny"}},
				"reason":     map[string]any{"type": "string"},
				"argsDigest": map[string]any{"type": "string", "const": p.ArgsDigest}}},
			"metadata": map[string]any{"airlock": map[string]any{
				"capability": p.Capability, "version": p.Version, "argsDigest": p.ArgsDigest,
				"arguments": p.Arguments, "display": display.Text(p.Display),
				"mayDecide": may, "whyNot": why, "whoMayDecide": who}},
		}
		if shown != nil {
			it["metadata"].(map[string]any)["airlock"].(map[string]any)["presentation"] = shown
		}
		if p.CallID != "" {
			it["toolCallId"] = p.CallID
		}
		list = append(list, it)
	}
	return map[string]any{"type": "interrupt", "interrupts": list}
}

// asciiJSON escapes every non-ASCII character of a JSON text as \uXXXX (bidi overrides and
// invisible characters cannot hide in it); the JSON means the same.
func asciiJSON(b []byte) string {
	var sb strings.Builder
	for _, r := range string(b) {
		switch {
		case r < 0x80:
			sb.WriteRune(r)
		case r > 0xFFFF:
			r -= 0x10000
			fmt.Fprintf(&sb, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		default:
			fmt.Fprintf(&sb, `\u%04x`, r)
		}
	}
	return sb.String()
}

// sse writes server-sent events to one response: a comment every 15 s keeps proxies from
// closing it, and every write must finish within writeTimeout or the follower is dropped (a
// client that stopped reading holds nothing for long).
type sse struct {
	mu sync.Mutex
	w  http.ResponseWriter
	rc *http.ResponseController
}

const writeTimeout = 10 * time.Second

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: http.NewResponseController(w)}
	_ = s.write("retry: 1000\n\n")
	return s
}

func (s *sse) write(text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := fmt.Fprint(s.w, text); err != nil {
		return err
	}
	return s.rc.Flush()
}

// event writes one event: id (when > 0), the AG-UI type as the event name, the JSON as data.
func (s *sse) event(id int64, ev map[string]any) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	var sb strings.Builder
	if id > 0 {
		fmt.Fprintf(&sb, "id: %d\n", id)
	}
	// Every non-ASCII character escaped: model and tool text cannot hide bidi overrides or
	// invisible characters in the data (the JSON means the same).
	fmt.Fprintf(&sb, "event: %v\ndata: %s\n\n", ev["type"], asciiJSON(b))
	return s.write(sb.String())
}

func (s *sse) keepAlive(ctx context.Context, cancel context.CancelFunc) {
	t := time.NewTicker(15 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if s.write(": keep-alive\n\n") != nil {
				cancel()
				return
			}
		}
	}
}

// events serves GET /v1/conversations/{c}/turns/{seq}/events: the turn's events as AG-UI 1.0
// (threadId the conversation, runId the turn id), each with its id (resume with
// Last-Event-ID), pending confirmations announced as CUSTOM airlock.interrupt events (no id:
// announced again after a reconnect) so the response carries at most one RUN_FINISHED, the
// turn's end.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	id, ok := s.turnID(w, r)
	if !ok {
		return
	}
	c := callerOf(r)
	var after int64
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			fail(w, http.StatusBadRequest, "bad_request", "Last-Event-ID must be a non-negative event id")
			return
		}
		after = n
	}
	if !s.openStream(c) {
		w.Header().Set("Retry-After", "5")
		fail(w, http.StatusTooManyRequests, "too_many_streams", fmt.Sprintf("this API key has %d event streams open already", s.opt.MaxStreamsPerCaller))
		return
	}
	defer s.closeStream(c)
	conv, _ := splitTurnID(id)
	out := newSSE(w)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go out.keepAlive(ctx, cancel)
	err := s.follow(ctx, id, after, false, func(e store.StreamEvent) error {
		for _, ev := range agui(e, conv, id, false) {
			if err := out.event(e.Seq, ev); err != nil {
				return err
			}
		}
		return nil
	}, func(p []stream.Pending) error {
		return out.event(0, map[string]any{"type": "CUSTOM", "name": "airlock.interrupt", "value": s.interruptOutcome(ctx, c, p)})
	})
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, errIdle) {
		s.opt.Log.Warn("appapi: event stream", "turn", id, "err", err)
	}
}
