package stream

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/parse"
	"github.com/airlock-dev/airlock/internal/store"
)

func testStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestRoundEvents: deltas become TEXT_MESSAGE_* and TOOL_CALL_* events, closed by End, and a
// retried write of the same round attempt writes nothing twice.
func TestRoundEvents(t *testing.T) {
	st := testStore(t)
	w := Writer{Store: st}
	ctx := context.Background()
	for range 2 { // the second pass is a retry of the same attempt: no new events
		r := w.Round(ctx, "turn/c/1", 1, 1)
		sink := r.Sink()
		sink(parse.Delta{Kind: parse.DeltaText, Text: "Hel"})
		sink(parse.Delta{Kind: parse.DeltaText, Text: "lo"})
		sink(parse.Delta{Kind: parse.DeltaCallStart, Call: 0, ID: "call_1", Name: "do_it"})
		sink(parse.Delta{Kind: parse.DeltaCallArgs, Call: 0, Text: `{"a":1}`})
		sink(parse.Delta{Kind: parse.DeltaCallArgs, Call: 5, Text: "orphan"}) // no start: dropped
		r.End()
	}
	evs, err := st.StreamEvents(ctx, "turn/c/1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	want := "TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_CONTENT TOOL_CALL_START TOOL_CALL_ARGS TEXT_MESSAGE_END TOOL_CALL_END"
	if strings.Join(types, " ") != want {
		t.Fatalf("events %s\nwant   %s", strings.Join(types, " "), want)
	}
	var start Event
	_ = json.Unmarshal(evs[3].Payload, &start)
	if start.ToolCallID != "call_1" || start.ToolCallName != "do_it" || start.ParentMessageID != "turn/c/1/r1/a1" {
		t.Errorf("TOOL_CALL_START %s", evs[3].Payload)
	}
}

// TestFollowInterruptAndEnd: a follower announces pending confirmations when the stream is
// idle (also to one that resumes after their events), stops announcing them once decided,
// ends after RUN_FINISHED, and a follower that resumes after the end gets the end again.
func TestFollowInterruptAndEnd(t *testing.T) {
	st := testStore(t)
	w := Writer{Store: st}
	ctx := context.Background()
	turn := "turn/c/2"
	w.Emit(ctx, turn, "run_started", Event{Type: RunStarted, RunID: turn})
	w.Emit(ctx, turn, "pending/cf-1", CustomEvent(ConfirmationPending, Pending{ConfirmationID: "cf-1", Capability: "web.fetch", Version: 1, ArgsDigest: "d"}))

	got := make(chan Delivered, 16)
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Follow(fctx, st, turn, 2, 5*time.Millisecond, func(d Delivered) error { got <- d; return nil })
	}()
	first := <-got
	var ev Event
	_ = json.Unmarshal(first.Payload, &ev)
	if first.Seq != 0 || ev.Type != RunFinished || ev.Outcome != "interrupt" || len(ev.Interrupts) != 1 || ev.Interrupts[0].ID != "cf-1" {
		t.Fatalf("resumed after the pending event: %+v %s", first, first.Payload)
	}
	w.Emit(ctx, turn, "decided/cf-1", CustomEvent(Decided, DecidedValue{ConfirmationID: "cf-1", Decision: "approved"}))
	w.Emit(ctx, turn, "finished", Event{Type: RunFinished, RunID: turn, Outcome: "success", Result: json.RawMessage(`{"prose":"ok"}`)})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	close(got)
	var seqs []int64
	for d := range got {
		seqs = append(seqs, d.Seq)
		if d.Seq == 0 {
			t.Errorf("an interrupt after the decision: %s", d.Payload)
		}
	}
	if len(seqs) != 2 || seqs[0] != 3 || seqs[1] != 4 {
		t.Fatalf("after the decision: seqs %v", seqs)
	}
	var again []Delivered
	if err := Follow(ctx, st, turn, 4, 0, func(d Delivered) error { again = append(again, d); return nil }); err != nil || len(again) != 1 || again[0].Seq != 4 {
		t.Fatalf("resume after the end: %+v %v", again, err)
	}
}

// TestHandler: the SSE endpoint needs the bearer token, a turn and a numeric resume id, and
// serves each event with its id and type, ending after the final one.
func TestHandler(t *testing.T) {
	st := testStore(t)
	w := Writer{Store: st}
	ctx := context.Background()
	turn := "turn/c/3"
	w.Emit(ctx, turn, "run_started", Event{Type: RunStarted, RunID: turn})
	w.Emit(ctx, turn, "t1", Event{Type: TextMessageContent, MessageID: "m", Delta: "hi \u202e"})
	w.Emit(ctx, turn, "finished", Event{Type: RunFinished, RunID: turn, Outcome: "success"})
	srv := httptest.NewServer(Handler(st, "secret-token-0123456789", 5*time.Millisecond))
	defer srv.Close()
	get := func(query, token, last string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/?"+query, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, tc := range []struct {
		query, token, last string
		status             int
	}{
		{"turn=" + turn, "", "", http.StatusUnauthorized},
		{"turn=" + turn, "wrong-token", "", http.StatusUnauthorized},
		{"", "secret-token-0123456789", "", http.StatusBadRequest},
		{"turn=" + turn, "secret-token-0123456789", "x", http.StatusBadRequest},
		{"turn=" + turn + "&after=-1", "secret-token-0123456789", "", http.StatusBadRequest},
	} {
		resp := get(tc.query, tc.token, tc.last)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%q token %q last %q: status %d, want %d", tc.query, tc.token, tc.last, resp.StatusCode, tc.status)
		}
	}
	resp := get("turn="+turn, "secret-token-0123456789", "1")
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	body := strings.Join(lines, "\n")
	if !strings.Contains(body, "id: 2\nevent: TEXT_MESSAGE_CONTENT\ndata: {") || !strings.Contains(body, "id: 3\nevent: RUN_FINISHED") || strings.Contains(body, "id: 1\n") {
		t.Fatalf("body:\n%s", body)
	}
}
