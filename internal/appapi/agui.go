package appapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/stream"
	"github.com/airlock-dev/airlock/workflows"
)

// RunAgentInput is the part of AG-UI 1.0's RunAgentInput this endpoint reads (other members
// are accepted and ignored, as AG-UI's own schema is open).
type RunAgentInput struct {
	ThreadID string            `json:"threadId"`
	RunID    string            `json:"runId"`
	Messages []json.RawMessage `json:"messages"`
	Resume   []ResumeEntry     `json:"resume,omitempty"`
}

// ResumeEntry answers one interrupt: its id is the confirmation id; status "resolved" with
// payload {decision, reason, argsDigest} decides it, "cancelled" denies it.
type ResumeEntry struct {
	InterruptID string `json:"interruptId"`
	Status      string `json:"status"`
	Payload     struct {
		Decision   string `json:"decision"`
		Reason     string `json:"reason"`
		ArgsDigest string `json:"argsDigest"`
	} `json:"payload"`
}

type aguiMessage struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// text is a user message's text: a string, or the text parts of an array of parts.
func (m aguiMessage) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(m.Content, &parts)
	var out []string
	for _, p := range parts {
		if p.Type == "text" {
			out = append(out, p.Text)
		}
	}
	return strings.Join(out, "\n")
}

// agui serves POST /v1/agui: the thread is the conversation. A RunAgentInput whose last
// message is a new user message starts a turn with it (the thread's first turn binds it to the
// caller's principal; the runId is the idempotency key, so a retried POST starts one turn);
// one with resume entries decides the interrupts it answers (only where the policy lets this
// caller decide) and follows the turn on; one with neither re-attaches to the thread's latest
// turn. The response is AG-UI 1.0 SSE: RUN_STARTED, the turn's events, and exactly one
// RUN_FINISHED (outcome success, or interrupt listing the pending confirmations, which ends
// the response) or RUN_ERROR. Errors before the stream are JSON: 400, 403, 404, 409.
func (s *Server) agui(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	var in RunAgentInput
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		fail(w, http.StatusBadRequest, "bad_request", "the body is not a RunAgentInput")
		return
	}
	if !ConversationPattern.MatchString(in.ThreadID) || in.RunID == "" || len(in.RunID) > 128 {
		fail(w, http.StatusBadRequest, "bad_request", "threadId must match "+ConversationPattern.String()+" and runId be 1-128 characters")
		return
	}
	ctx := r.Context()
	owner, err := s.opt.Store.ConversationOwner(ctx, in.ThreadID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		fail(w, http.StatusServiceUnavailable, "store_unavailable", "the store did not answer")
		return
	}
	// The thread's requester runs it; an approver may only resume it (decideAs then applies
	// the policy: eligibility, four-eyes). Anyone else learns nothing of the thread.
	isOwner := c.Principal != "" && (err != nil || owner == c.Principal)
	if !isOwner && (len(in.Resume) == 0 || c.Approver == "" || err != nil) {
		if c.Principal == "" && c.Approver == "" {
			fail(w, http.StatusForbidden, "not_a_requester", "this API key can neither run nor resume an agent")
			return
		}
		fail(w, http.StatusNotFound, "not_found", "no such thread")
		return
	}
	latest, _ := s.opt.Store.LatestTurn(ctx, in.ThreadID)
	var msg aguiMessage
	if n := len(in.Messages); n > 0 {
		_ = json.Unmarshal(in.Messages[n-1], &msg)
	}
	var after int64
	turn := latest
	switch {
	case len(in.Resume) > 0:
		if latest == "" {
			fail(w, http.StatusNotFound, "not_found", "this thread has no turn to resume")
			return
		}
		last, err := s.opt.Store.StreamEvents(ctx, latest, 0, 0)
		if err != nil {
			fail(w, http.StatusServiceUnavailable, "store_unavailable", "the store did not answer")
			return
		}
		for _, e := range last {
			after = e.Seq
		}
		for _, re := range in.Resume {
			if err := s.resume(ctx, c, latest, re); err != nil {
				var he *httpError
				if errors.As(err, &he) {
					fail(w, he.status, he.code, he.msg)
				} else {
					fail(w, http.StatusBadGateway, "decide_failed", "the decision could not be delivered")
				}
				return
			}
		}
	case msg.Role == "user" && msg.text() != "":
		if latest != "" {
			if t, err := s.turnOf(ctx, latest, c); err == nil && t.Status == workflows.StatusAwaitingConfirmation {
				fail(w, http.StatusConflict, "interrupt_pending", "the thread's turn waits for a decision: resume its interrupt first")
				return
			}
		}
		t, _, err := s.start(ctx, c, "agui:"+in.ThreadID+":"+in.RunID, StartRequest{Conversation: in.ThreadID, Message: msg.text()})
		if err != nil {
			var he *httpError
			if errors.As(err, &he) {
				fail(w, he.status, he.code, he.msg)
			} else {
				fail(w, http.StatusBadGateway, "start_failed", "the turn could not be started")
			}
			return
		}
		turn = t.ID
	case latest == "":
		fail(w, http.StatusNotFound, "not_found", "this thread has no turn, and the input has no user message to start one")
		return
	}
	if !s.openStream(c) {
		w.Header().Set("Retry-After", "5")
		fail(w, http.StatusTooManyRequests, "too_many_streams", fmt.Sprintf("this API key has %d event streams open already", s.opt.MaxStreamsPerCaller))
		return
	}
	defer s.closeStream(c)
	out := newSSE(w)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go out.keepAlive(fctx, cancel)
	if err := out.event(0, map[string]any{"type": "RUN_STARTED", "threadId": in.ThreadID, "runId": in.RunID, "timestamp": time.Now().UnixMilli()}); err != nil {
		return
	}
	finished := false
	answered := false // the answer's text streamed since the last outcome
	err = s.follow(fctx, turn, after, true, func(e store.StreamEvent) error {
		for _, ev := range agui(e, in.ThreadID, in.RunID, true) {
			switch ev["type"] {
			case stream.TextMessageContent:
				answered = true
			case "TOOL_CALL_RESULT":
				answered = false
			case stream.RunFinished:
				// A model that answered without streaming wrote no text events: the answer
				// goes out as one text message, so an AG-UI front end shows it.
				if !answered {
					if err := proseMessage(out, ev, in.RunID); err != nil {
						return err
					}
				}
				finished = true
			case stream.RunError:
				finished = true
			}
			if err := out.event(0, ev); err != nil {
				return err
			}
		}
		return nil
	}, func(p []stream.Pending) error {
		finished = true
		return out.event(0, map[string]any{"type": "RUN_FINISHED", "threadId": in.ThreadID, "runId": in.RunID,
			"timestamp": time.Now().UnixMilli(), "outcome": s.interruptOutcome(fctx, c, p)})
	})
	if !finished && fctx.Err() == nil {
		msgText := "the turn's stream ended"
		if errors.Is(err, errIdle) {
			msgText = "no event within the idle limit: run again to re-attach"
		}
		_ = out.event(0, map[string]any{"type": "RUN_ERROR", "message": msgText, "code": "airlock_stream_ended"})
	}
}

// resume decides the interrupt re answers on the thread's latest turn, as c.
func (s *Server) resume(ctx context.Context, c Caller, turn string, re ResumeEntry) error {
	row, err := s.opt.Store.GetConfirmation(ctx, re.InterruptID)
	if err != nil || row.WorkflowID != turn {
		return &httpError{http.StatusNotFound, "not_found", "no such interrupt on this thread"}
	}
	req := DecisionRequest{Decision: re.Payload.Decision, Reason: re.Payload.Reason, ArgsDigest: re.Payload.ArgsDigest}
	switch re.Status {
	case "resolved":
	case "cancelled":
		req.Decision = workflows.DecisionDeny
		if req.Reason == "" {
			req.Reason = "cancelled by the user"
		}
	default:
		return &httpError{http.StatusBadRequest, "bad_request", `resume status must be "resolved" or "cancelled"`}
	}
	if req.ArgsDigest == "" {
		req.ArgsDigest = row.ArgsDigest // the interrupt showed these arguments
	}
	_, err = s.decideAs(ctx, c, re.InterruptID, req)
	return err
}

// proseMessage writes the final answer of a RUN_FINISHED event's result (its prose, model
// text: JSON-escaped by the writer like every event) as one assistant text message.
func proseMessage(out *sse, finished map[string]any, runID string) error {
	res, _ := finished["result"].(map[string]any)
	prose, _ := res["prose"].(string)
	if prose == "" {
		return nil
	}
	id := runID + "/answer"
	for _, ev := range []map[string]any{
		{"type": stream.TextMessageStart, "messageId": id, "role": "assistant"},
		{"type": stream.TextMessageContent, "messageId": id, "delta": prose},
		{"type": stream.TextMessageEnd, "messageId": id},
	} {
		if err := out.event(0, ev); err != nil {
			return err
		}
	}
	return nil
}
