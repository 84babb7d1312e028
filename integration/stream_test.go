package integration

import (
	"bufio"
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

	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	airlockclient "github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/parse"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/stream"
	"github.com/airlock-dev/airlock/workflows"
)

// streamingModel is a real local model server speaking both the OpenAI chat-completions
// (/v1/chat/completions) and the Anthropic Messages (/v1/messages) wire formats. Round r (one
// more than the assistant messages in the request) is answered with rounds[r-1] (then a final
// answer), unstreamed when the request does not ask to stream and otherwise as the provider's
// stream of the same body (parse.Disassemble, string pieces of piece bytes), one event every
// interval: a model that streams at a fixed rate.
type streamingModel struct {
	*httptest.Server
	mu       sync.Mutex
	bodies   []string
	rounds   []string
	final    string
	piece    int
	interval time.Duration
	// sentText is when the model wrote, in each streamed response, its first event that
	// carries answer text (zero for responses without text).
	sentText []time.Time
	// failures are consumed one a request, before any answer: "529" answers HTTP 529
	// overloaded_error, "event" streams some text and then an overloaded error event.
	failures []string
}

func newStreamingModel(t *testing.T, piece int, interval time.Duration, final string, rounds ...string) *streamingModel {
	m := &streamingModel{rounds: rounds, final: final, piece: piece, interval: interval}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.Close)
	return m
}

func (m *streamingModel) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.bodies...)
}

func (m *streamingModel) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	m.bodies = append(m.bodies, string(b))
	m.mu.Unlock()
	var req struct {
		Stream   bool `json:"stream"`
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(b, &req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	round := 1
	for _, msg := range req.Messages {
		if msg.Role == "assistant" {
			round++
		}
	}
	body := m.final
	if round <= len(m.rounds) {
		body = m.rounds[round-1]
	}
	m.mu.Lock()
	var failure string
	if len(m.failures) > 0 {
		failure, m.failures = m.failures[0], m.failures[1:]
	}
	m.mu.Unlock()
	switch failure {
	case "529":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(529)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
		return
	case "event":
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-fake\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null}}\n\n"+
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Half an ans\"}}\n\n"+
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
		return
	}
	anthropic := r.URL.Path == "/v1/messages"
	if (r.URL.Path != "/v1/chat/completions" && !anthropic) || (anthropic != (parse.DetectFormat([]byte(body)) == parse.FormatAnthropic)) {
		http.Error(w, "wrong endpoint for this model", http.StatusNotFound)
		return
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
		return
	}
	events, err := parse.Disassemble(parse.FormatAuto, []byte(body), m.piece)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	var sent time.Time
	defer func() {
		m.mu.Lock()
		m.sentText = append(m.sentText, sent)
		m.mu.Unlock()
	}()
	for _, e := range events {
		if sent.IsZero() && (strings.Contains(string(e), `"content":"`) || strings.Contains(string(e), `"text_delta"`)) {
			sent = time.Now()
		}
		if anthropic {
			var typ struct {
				Type string `json:"type"`
			}
			_ = json.Unmarshal(e, &typ)
			fmt.Fprintf(w, "event: %s\n", typ.Type)
		}
		fmt.Fprintf(w, "data: %s\n\n", e)
		fl.Flush()
		time.Sleep(m.interval)
	}
	if !anthropic {
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
		fl.Flush()
	}
}

func anthMessage(stop string, blocks ...string) string {
	return `{"id":"msg_it","type":"message","role":"assistant","model":"claude-fake","content":[` + strings.Join(blocks, ",") +
		`],"stop_reason":"` + stop + `","stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":8}}`
}

func anthText(s string) string {
	b, _ := json.Marshal(s)
	return `{"type":"text","text":` + string(b) + `}`
}

func anthToolUse(id, name, input string) string {
	return fmt.Sprintf(`{"type":"tool_use","id":%q,"name":%q,"input":%s}`, id, name, input)
}

// sseEvent is one server-sent event as a client receives it.
type sseEvent struct {
	ID   string
	Type string
	Data json.RawMessage
	At   time.Time
}

// sseFollow connects to the stream endpoint for turn (after lastID when set) and sends every
// event to out until the response ends or ctx is done.
func sseFollow(ctx context.Context, t *testing.T, base, token, turn, lastID string, out chan<- sseEvent) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/stream?turn="+turn, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			t.Errorf("stream request: %v", err)
		}
		close(out)
		return
	}
	defer resp.Body.Close()
	defer close(out)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("stream status %d", resp.StatusCode)
		return
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Type != "" {
				ev.At = time.Now()
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			ev.ID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			ev.Type = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.Data = json.RawMessage(strings.TrimPrefix(line, "data: "))
		}
	}
}

// streamEndpointOf serves st as the stream endpoint (what `airlock stream serve` runs) and
// returns its URL and bearer token.
func streamEndpointOf(t *testing.T, st *store.Store) (string, string) {
	token := "it-stream-token-0123456789"
	srv := httptest.NewServer(stream.Handler(st, token, stream.DefaultPoll))
	t.Cleanup(srv.Close)
	return srv.URL, token
}

func customName(data json.RawMessage) string {
	var ev struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(data, &ev)
	return ev.Name
}

// TestAnthropicTurnStreamed is a real turn on the dev server with Anthropic Messages as the
// live model (a local fake server streaming recorded-shape events): two parallel tool_use
// calls of an automatic capability run, their results go back as tool_result blocks holding
// the untrusted-data envelope, the final answer streams, and a client following the SSE
// endpoint sees the whole turn as AG-UI events, in order.
func TestAnthropicTurnStreamed(t *testing.T) {
	model := newStreamingModel(t, 3, 2*time.Millisecond, anthMessage("end_turn", anthText("All healthy. Grüße 😀")),
		anthMessage("tool_use", anthText("Checking health."), anthToolUse("toolu_1", "system_health", `{}`), anthToolUse("toolu_2", "system_health", `{}`)))
	t.Setenv("AIRLOCK_OPENAI_BASE_URL", "")
	t.Setenv("AIRLOCK_ANTHROPIC_BASE_URL", model.URL)
	t.Setenv("AIRLOCK_ANTHROPIC_API_KEY", "sk-ant-it")
	t.Setenv("AIRLOCK_ANTHROPIC_MODEL", "claude-fake")
	c := dial(t)
	cfg := testConfig(t)
	startWorker(t, c, cfg)
	st := openStore(t, cfg)
	base, token := streamEndpointOf(t, st)

	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "anthropic-stream", Message: "Is the system healthy?"})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	events := make(chan sseEvent, 1024)
	go sseFollow(ctx, t, base, token, run.GetID(), "", events)
	var got []sseEvent
	for ev := range events {
		got = append(got, ev)
	}
	res := result(t, run)
	if res.EndReason != "answered" || res.Prose != "All healthy. Grüße 😀" || outcomeList(res) != "system_health:executed system_health:executed" {
		t.Fatalf("result: %s %q %s", res.EndReason, res.Prose, outcomeList(res))
	}
	reqs := model.requests()
	if len(reqs) != 2 || !strings.Contains(reqs[0], `"stream":true`) {
		t.Fatalf("requests: %d %v", len(reqs), reqs)
	}
	var second struct {
		Messages []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal([]byte(reqs[1]), &second); err != nil {
		t.Fatal(err)
	}
	last := second.Messages[len(second.Messages)-1]
	if last.Role != "user" || len(last.Content) != 2 {
		t.Fatalf("tool results are not one user message of two blocks: %s", reqs[1])
	}
	for i, blk := range last.Content {
		var tr struct {
			Type      string `json:"type"`
			ToolUseID string `json:"tool_use_id"`
			Content   any    `json:"content"`
		}
		_ = json.Unmarshal(blk, &tr)
		if tr.Type != "tool_result" || tr.ToolUseID != fmt.Sprintf("toolu_%d", i+1) || !strings.Contains(string(blk), `untrusted`) {
			t.Errorf("result block %d: %s", i, blk)
		}
	}
	if len(second.Tools) == 0 {
		t.Error("no tools offered")
	}

	// The client's view: AG-UI events in order.
	var types []string
	var text strings.Builder
	lastID := 0
	for _, ev := range got {
		if ev.ID != "" {
			var id int
			fmt.Sscan(ev.ID, &id)
			if id != lastID+1 {
				t.Fatalf("event ids not consecutive: %d after %d", id, lastID)
			}
			lastID = id
		}
		name := ev.Type
		if ev.Type == stream.Custom {
			name += ":" + customName(ev.Data)
		}
		types = append(types, name)
		if ev.Type == stream.TextMessageContent {
			var d struct {
				Delta string `json:"delta"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			text.WriteString(d.Delta)
		}
	}
	seq := strings.Join(types, " ")
	for _, want := range []string{stream.RunStarted, stream.TextMessageStart, stream.TextMessageContent, stream.TextMessageEnd,
		stream.ToolCallStart, stream.ToolCallArgs, stream.ToolCallEnd, "CUSTOM:" + stream.Executed} {
		if !strings.Contains(seq, want) {
			t.Errorf("no %s in %s", want, seq)
		}
	}
	if types[0] != stream.RunStarted || types[len(types)-1] != stream.RunFinished {
		t.Errorf("stream does not run from RUN_STARTED to RUN_FINISHED: %s", seq)
	}
	if text.String() != "Checking health.All healthy. Grüße 😀" {
		t.Errorf("streamed text %q", text.String())
	}
}

// readUntil reads events until one satisfies stop (returned) or the channel closes.
func readUntil(t *testing.T, events <-chan sseEvent, what string, stop func(sseEvent) bool) (sseEvent, []sseEvent) {
	t.Helper()
	var seen []sseEvent
	timeout := time.After(60 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("stream ended before %s; saw %d events", what, len(seen))
			}
			seen = append(seen, ev)
			if stop(ev) {
				return ev, seen
			}
		case <-timeout:
			t.Fatalf("no %s within 60 s; saw %d events", what, len(seen))
		}
	}
}

// TestStreamConfirmationSurvivesReconnect: a call that needs confirmation shows in the stream
// as airlock.confirmation_pending with what the approver card shows; a client that reconnects
// after that event (Last-Event-ID) is told again, in a RUN_FINISHED interrupt, that it is
// pending; after the decision the same connection carries decided, executed and the final
// RUN_FINISHED; and the Go client's Turn.Stream replays the whole finished turn.
func TestStreamConfirmationSurvivesReconnect(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "page text")
	}))
	t.Cleanup(target.Close)
	model := newStreamingModel(t, 5, time.Millisecond, answer("Fetched it."),
		calls(call("c1", "web_fetch", fmt.Sprintf(`{"url":"%s/page"}`, target.URL))))
	t.Setenv("AIRLOCK_OPENAI_BASE_URL", model.URL+"/v1")
	t.Setenv("AIRLOCK_OPENAI_API_KEY", "test")
	c := dial(t)
	cfg := testConfig(t)
	cfg.FetchAllow = []string{"127.0.0.0/8"}
	startWorker(t, c, cfg)
	st := openStore(t, cfg)
	base, token := streamEndpointOf(t, st)
	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "stream-confirm", Message: "fetch the page", Principal: "alice"})

	ctx1, cancel1 := context.WithCancel(context.Background())
	first := make(chan sseEvent, 256)
	go sseFollow(ctx1, t, base, token, run.GetID(), "", first)
	pendingEv, _ := readUntil(t, first, "confirmation_pending", func(ev sseEvent) bool {
		return ev.Type == stream.Custom && customName(ev.Data) == stream.ConfirmationPending
	})
	cancel1()
	var card struct {
		Value stream.Pending `json:"value"`
	}
	if err := json.Unmarshal(pendingEv.Data, &card); err != nil {
		t.Fatal(err)
	}
	if card.Value.Capability != "web.fetch" || !strings.Contains(string(card.Value.Arguments), target.URL) || card.Value.ArgsDigest == "" || pendingEv.ID == "" {
		t.Fatalf("pending event %s (id %q)", pendingEv.Data, pendingEv.ID)
	}

	ctx2, cancel2 := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel2()
	second := make(chan sseEvent, 256)
	go sseFollow(ctx2, t, base, token, run.GetID(), pendingEv.ID, second)
	intr, _ := readUntil(t, second, "the interrupt after reconnecting", func(ev sseEvent) bool { return ev.Type == stream.RunFinished })
	var ie stream.Event
	if err := json.Unmarshal(intr.Data, &ie); err != nil {
		t.Fatal(err)
	}
	if intr.ID != "" || ie.Outcome != "interrupt" || len(ie.Interrupts) != 1 || ie.Interrupts[0].ID != card.Value.ConfirmationID || ie.Interrupts[0].Payload.Capability != "web.fetch" {
		t.Fatalf("reconnect: %s (id %q)", intr.Data, intr.ID)
	}
	decide(t, c, cfg, st, card.Value.ConfirmationID, "approve", "alice")
	end, rest := readUntil(t, second, "the final RUN_FINISHED", func(ev sseEvent) bool {
		var e stream.Event
		_ = json.Unmarshal(ev.Data, &e)
		return ev.Type == stream.RunFinished && e.Outcome == "success"
	})
	var names []string
	for _, ev := range rest {
		if ev.Type == stream.Custom {
			names = append(names, customName(ev.Data))
		}
	}
	if got := strings.Join(names, " "); !strings.Contains(got, stream.Decided+" "+stream.Executed) {
		t.Errorf("after the decision: %s", got)
	}
	var fin stream.Event
	_ = json.Unmarshal(end.Data, &fin)
	var tr workflows.TurnResult
	if err := json.Unmarshal(fin.Result, &tr); err != nil || tr.Prose != "Fetched it." || outcomeList(tr) != "web_fetch:executed" {
		t.Fatalf("final result %s: %v", fin.Result, err)
	}
	if res := result(t, run); res.Prose != "Fetched it." {
		t.Fatalf("turn result %+v", res)
	}

	// The Go client replays the finished turn from the start and stops at its end.
	ac, err := airlockclient.New(context.Background(), c, airlockclient.Options{DatabaseURL: cfg.StoreURL(), TaskQueue: cfg.TaskQueue})
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	var all []airlockclient.StreamEvent
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	if err := ac.Turn(run.GetID()).Stream(sctx, 0, airlockclient.StreamOptions{Poll: 20 * time.Millisecond}, func(e airlockclient.StreamEvent) error {
		all = append(all, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 || all[0].Type != airlockclient.EventRunStarted || all[len(all)-1].Type != airlockclient.EventRunFinished {
		t.Fatalf("Go client stream: %+v", all)
	}
	var after []airlockclient.StreamEvent
	if err := ac.Turn(run.GetID()).Stream(sctx, all[len(all)-1].ID, airlockclient.StreamOptions{}, func(e airlockclient.StreamEvent) error {
		after = append(after, e)
		return nil
	}); err != nil || len(after) != 1 || after[0].ID != all[len(all)-1].ID {
		t.Fatalf("reconnect after the end: %+v %v (want the final event again)", after, err)
	}
}

// historyOf counts a turn's history events and their encoded bytes.
func historyOf(t *testing.T, c client.Client, id string) (events, bytes int) {
	it := c.GetWorkflowHistory(context.Background(), id, "", false, 0)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		events++
		bytes += proto.Size(e)
	}
	return events, bytes
}

// TestStreamLatencyAndHistory measures, through the whole stack (fake model → provider
// stream → Infer → store → SSE endpoint → client), the latency to the first text delta of a
// model that streams one piece every 20 ms, and compares the history of the same turn
// streamed and unstreamed. The first delta must arrive long before the answer's stream ends
// (that is what streaming is for), and the history must have the same events and no more
// bytes than unstreamed plus a few (the assembled body is the unstreamed body's shape).
func TestStreamLatencyAndHistory(t *testing.T) {
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 6) // 270 bytes: 68 pieces of 4
	model := newStreamingModel(t, 4, 20*time.Millisecond, answer(long), calls(call("c1", "system_health", `{}`)))
	t.Setenv("AIRLOCK_OPENAI_BASE_URL", model.URL+"/v1")
	t.Setenv("AIRLOCK_OPENAI_API_KEY", "test")
	c := dial(t)
	streamed := testConfig(t)
	startWorker(t, c, streamed)
	st := openStore(t, streamed)
	base, token := streamEndpointOf(t, st)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	run := startTurn(t, c, streamed, workflows.TurnRequest{Conversation: "stream-latency", Message: "health, then a long answer"})
	events := make(chan sseEvent, 4096)
	go sseFollow(ctx, t, base, token, run.GetID(), "", events)
	var firstDelta, lastDelta, finished time.Time
	round := 0
	for ev := range events {
		switch ev.Type {
		case stream.TextMessageStart:
			round++
		case stream.TextMessageContent:
			if round == 1 && firstDelta.IsZero() {
				firstDelta = ev.At // round 1 answers with a call only: the first text is the answer's
			}
			lastDelta = ev.At
		case stream.RunFinished:
			finished = ev.At
		}
	}
	if res := result(t, run); res.Prose != long {
		t.Fatalf("prose %q", res.Prose)
	}
	if firstDelta.IsZero() || finished.IsZero() {
		t.Fatal("no delta or no RUN_FINISHED in the stream")
	}
	streamSpan := lastDelta.Sub(firstDelta)
	model.mu.Lock()
	var sent time.Time
	for _, s := range model.sentText {
		if !s.IsZero() {
			sent = s // the answer's round: the only streamed response with text
		}
	}
	model.mu.Unlock()
	if sent.IsZero() {
		t.Fatal("the model sent no text")
	}
	t.Logf("latency to first delta: model wrote the answer's first text → client received it over SSE %v; turn start → first delta %v; first → last delta %v; start → RUN_FINISHED %v (68 pieces at 20 ms)",
		firstDelta.Sub(sent).Round(time.Millisecond), firstDelta.Sub(start).Round(time.Millisecond), streamSpan.Round(time.Millisecond), finished.Sub(start).Round(time.Millisecond))
	if streamSpan < 900*time.Millisecond {
		t.Errorf("the answer's deltas arrived within %v: not streamed as the model streamed it (68 × 20 ms)", streamSpan)
	}

	t.Setenv("AIRLOCK_STREAM", "0")
	plain := testConfig(t)
	startWorker(t, c, plain)
	run2 := startTurn(t, c, plain, workflows.TurnRequest{Conversation: "stream-latency", Message: "health, then a long answer"})
	if res := result(t, run2); res.Prose != long {
		t.Fatalf("unstreamed prose %q", res.Prose)
	}
	se, sb := historyOf(t, c, run.GetID())
	pe, pb := historyOf(t, c, run2.GetID())
	t.Logf("history per turn: streamed %d events, %d bytes; unstreamed %d events, %d bytes", se, sb, pe, pb)
	if se != pe {
		t.Errorf("streaming changed the history: %d events, unstreamed %d", se, pe)
	}
	if sb > pb+pb/50 {
		t.Errorf("streamed history %d bytes, unstreamed %d: more than 2%% larger", sb, pb)
	}
	var n int
	for _, r := range model.requests() {
		if strings.Contains(r, `"stream":true`) {
			n++
		}
	}
	if n != 2 || len(model.requests()) != 4 {
		t.Errorf("requests: %d streamed of %d, want 2 of 4", n, len(model.requests()))
	}
}

// TestAnthropicOverloadedIsRetried: an HTTP 529 overloaded answer and an overloaded error
// event in the middle of a stream are retried as the OpenAI path's errors are (the Infer
// activity's retry policy); the half answer of the broken stream is never the message (the
// retried attempt streams as a new message id) and the turn answers.
func TestAnthropicOverloadedIsRetried(t *testing.T) {
	model := newStreamingModel(t, 8, time.Millisecond, anthMessage("end_turn", anthText("Recovered answer.")))
	model.failures = []string{"529", "event"}
	t.Setenv("AIRLOCK_OPENAI_BASE_URL", "")
	t.Setenv("AIRLOCK_ANTHROPIC_BASE_URL", model.URL)
	t.Setenv("AIRLOCK_ANTHROPIC_API_KEY", "sk-ant-it")
	c := dial(t)
	cfg := testConfig(t)
	startWorker(t, c, cfg)
	st := openStore(t, cfg)
	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "anthropic-overloaded", Message: "hello"})
	res := result(t, run)
	if res.EndReason != "answered" || res.Prose != "Recovered answer." {
		t.Fatalf("result %s %q", res.EndReason, res.Prose)
	}
	if n := len(model.requests()); n != 3 {
		t.Fatalf("%d requests, want 3 (529, broken stream, answer)", n)
	}
	evs, err := st.StreamEvents(context.Background(), run.GetID(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	msgs := map[string]string{}
	for _, e := range evs {
		if e.Type == stream.TextMessageContent {
			var ev stream.Event
			_ = json.Unmarshal(e.Payload, &ev)
			msgs[ev.MessageID] += ev.Delta
		}
	}
	if msgs[run.GetID()+"/r1/a2"] != "Half an ans" || msgs[run.GetID()+"/r1/a3"] != "Recovered answer." {
		t.Fatalf("streamed messages %v", msgs)
	}
}
