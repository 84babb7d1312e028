package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/parse"
	"github.com/airlock-dev/airlock/internal/stream"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workflows"
)

// sseModel is a real local OpenAI-compatible server that streams (server-sent events, a few
// bytes a chunk) its answer to the n-th request (0-based), reply(n); it keeps every body.
type sseModel struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newSSEModel(t *testing.T, reply func(n int) string) *sseModel {
	m := &sseModel{}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		n := len(m.bodies)
		m.bodies = append(m.bodies, string(b))
		m.mu.Unlock()
		body := reply(n)
		if !strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, body)
			return
		}
		events, err := parse.Disassemble(parse.FormatAuto, []byte(body), 4)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			fmt.Fprintf(w, "data: %s\n\n", e)
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *sseModel) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.bodies...)
}

// A round asked again with the stored snapshot's offer (an earlier attempt stored another
// snapshot) streams its second answer as a message of its own: the first answer, discarded,
// must not swallow the second's events (stream events are deduplicated by message id and
// position, and both asks ran in one attempt). The client sees the answer the turn gave.
func TestStop27SecondAskStreamsItsOwnMessage(t *testing.T) {
	const final = "Noted, nothing to correct here at all."
	model := newSSEModel(t, func(n int) string {
		switch n {
		case 0:
			return answer("The capital of Australia is Sydney.")
		case 1: // turn 2, first ask (its own snapshot's offer): a long proposal call
			return calls(call("c1", "submit_correction", correctionArgs("latest", secretReplacement)))
		}
		return answer(final)
	})
	t.Setenv("AIRLOCK_OPENAI_BASE_URL", model.URL+"/v1")
	t.Setenv("AIRLOCK_OPENAI_API_KEY", "test")
	t.Setenv("AIRLOCK_STREAM", "1")
	c := dial(t)
	cfg := testConfig(t)
	startWorker(t, c, cfg)
	st := openStore(t, cfg)
	ctx := context.Background()
	conv := "snapstream-" + cfg.TaskQueue
	wf2 := workflows.TurnWorkflowID(conv, 2)
	if r1 := result(t, startTurnSeq(t, c, cfg, conv, 1, "What is the capital of Australia?")); r1.EndReason != "answered" {
		t.Fatalf("turn 1: %+v", r1)
	}
	storeFocusOnlySnapshot(ctx, t, st, conv, wf2)
	r2 := result(t, startTurnSeq(t, c, cfg, conv, 2, "That was wrong, correct your last reply."))
	if reqs := model.requests(); len(reqs) != 3 || !strings.Contains(reqs[1], `"stream":true`) {
		t.Fatalf("turn 2 made %d requests (want 2, streamed), so the test proves nothing", len(reqs)-1)
	}
	if r2.EndReason != "answered" || r2.Prose != final {
		t.Fatalf("turn 2: %s %q %s", r2.EndReason, r2.Prose, outcomeList(r2))
	}
	evs, err := st.StreamEvents(ctx, wf2, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	text := map[string]string{} // message id → streamed text
	var callParents []string
	for _, e := range evs {
		var ev stream.Event
		if err := json.Unmarshal(e.Payload, &ev); err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case stream.TextMessageContent:
			text[ev.MessageID] += ev.Delta
		case stream.ToolCallStart:
			callParents = append(callParents, ev.ParentMessageID)
		}
	}
	var msgID string
	for id, s := range text {
		if s == final {
			msgID = id
		}
	}
	if msgID == "" {
		t.Fatalf("the turn's answer %q never streamed whole: streamed text %q", final, text)
	}
	for _, p := range callParents {
		if p == msgID {
			t.Fatalf("the discarded first answer's proposal call streams inside the answer's message %s", msgID)
		}
	}
}

// The second ask binds to the stored snapshot: a proposal it names from the stored offer is
// captured against the stored snapshot, and one it names that only the discarded first offer
// had (submit_correction) is never captured.
func TestStop27SecondAskCapturesAgainstStoredSnapshot(t *testing.T) {
	model := newModelServer(t, func(n int, _ []byte) (int, string) {
		switch n {
		case 0:
			return http.StatusOK, answer("The capital of Australia is Sydney.")
		case 1, 2: // turn 2: a correction, asked first with its own offer, then with the stored one
			return http.StatusOK, calls(call("c1", "submit_correction", correctionArgs("latest", secretReplacement)))
		}
		return http.StatusOK, answer("Noted.")
	})
	c, cfg, st := liveModelStack(t, model)
	ctx := context.Background()
	conv := "snapbind-" + cfg.TaskQueue
	wf2 := workflows.TurnWorkflowID(conv, 2)
	if r1 := result(t, startTurnSeq(t, c, cfg, conv, 1, "What is the capital of Australia?")); r1.EndReason != "answered" {
		t.Fatalf("turn 1: %+v", r1)
	}
	earlier := storeFocusOnlySnapshot(ctx, t, st, conv, wf2)
	r2 := result(t, startTurnSeq(t, c, cfg, conv, 2, "That was wrong, correct your last reply."))
	reqs := model.requests()
	if len(reqs) < 3 || !strings.Contains(reqs[1], `"submit_correction"`) || strings.Contains(reqs[2], `"submit_correction"`) {
		t.Fatalf("turn 2 was not asked again with the stored offer (%d requests)", len(reqs)-1)
	}
	if rows, err := st.ListProposals(ctx, wf2); err != nil || len(rows) != 0 {
		t.Fatalf("a correction the stored snapshot never offered was captured: %+v %v", rows, err)
	}
	// The second answer's submit_correction, a proposal tool that round did not offer, is
	// refused at resolve (never a capability call a human is asked to confirm), and the turn
	// goes on to its answer.
	if r2.EndReason != "answered" || r2.Prose != "Noted." || len(r2.Outcomes) != 1 || r2.Outcomes[0].Name != "submit_correction" ||
		r2.Outcomes[0].Outcome != "rejected" || r2.Outcomes[0].Reason != registry.RefusalNotDispatchable {
		t.Fatalf("turn 2: %s %q %s", r2.EndReason, r2.Prose, outcomeList(r2))
	}
	if ids, err := st.PendingIDs(ctx, time.Now()); err != nil || len(ids) != 0 {
		t.Fatalf("confirmations issued for a proposal tool: %v %v", ids, err)
	}
	if got, err := st.GetSnapshot(ctx, earlier.ID); err != nil || string(got) != string(earlier.Encode()) {
		t.Fatalf("the stored snapshot changed: %s %v", got, err)
	}
}
