package integration

// Issue 31, item 2: the provider-traffic corpus (../shared/provider-traffic, read from there and
// never copied) end to end. A local HTTP server replays each recorded response, byte for byte,
// to the real provider adapters (internal/inference: chat completions for OpenAI and every
// OpenAI-compatible server, Ollama's native /api/chat, Anthropic Messages, the Responses API;
// Ollama's files to both its native adapter and the chat-completions one) inside real turns
// on the Temporal dev server, with the PostgreSQL store; each file's reading is held to its
// manifest line (internal/traffic) from what the turn did: its round-1 Infer result in the
// turn's history, the proposals the executor saw (turn result and audit rows), or the turn's
// failure.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/parse"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/stream"
	"github.com/airlock-dev/airlock/internal/traffic"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

// trafficEventGap paces a replayed stream: the corpus keeps no per-event timing (its README:
// pydantic-ai cassettes store the body, vercel/ai fixtures one chunk per line, openai-python
// snapshots the raw bytes), so every SSE event and NDJSON line is written and flushed on its
// own, this long after the previous one, as a server that streams does.
const trafficEventGap = time.Millisecond

// trafficInferAttempts is the Infer activity's MaximumAttempts (workflows/turn.go, turn.infer:
// enough to ride out a store outage of a minute, issue 38).
const trafficInferAttempts = workflows.StoreOutageAttempts

// trafficFinal is the plain answer every later round gets, so a turn whose first round
// proposed calls ends.
const trafficFinal = "provider-traffic: done"

// trafficAPI is which real adapter reads a file (one worker each).
type trafficAPI string

const (
	apiChat         trafficAPI = "chat-completions" // inference.NewOpenAI: OpenAI and every compatible server (SSE, a JSON body, or Ollama's NDJSON)
	apiOllamaNative trafficAPI = "ollama-native"    // inference.NewOllama: Ollama's /api/chat
	apiAnthropic    trafficAPI = "anthropic"        // inference.NewAnthropic: Messages
	apiResponses    trafficAPI = "responses"        // inference.NewOpenAIResponses: the Responses API
)

// apisOf are the adapters a file is replayed to: its API's own; an Ollama /api/chat file also
// to the chat-completions adapter, which reads an NDJSON stream or an Ollama body where an
// OpenAI-compatible server answers with one.
func apisOf(shape traffic.Shape) []trafficAPI {
	switch shape {
	case traffic.ShapeAnthropicJSON, traffic.ShapeAnthropicSSE:
		return []trafficAPI{apiAnthropic}
	case traffic.ShapeResponsesJSON, traffic.ShapeResponsesSSE:
		return []trafficAPI{apiResponses}
	case traffic.ShapeOllamaJSON, traffic.ShapeOllamaNDJSON:
		return []trafficAPI{apiOllamaNative, apiChat}
	}
	return []trafficAPI{apiChat}
}

// path is the endpoint the adapter posts to.
func (a trafficAPI) path() string {
	switch a {
	case apiAnthropic:
		return "/v1/messages"
	case apiResponses:
		return "/v1/responses"
	case apiOllamaNative:
		return "/api/chat"
	}
	return "/v1/chat/completions"
}

// final is the unstreamed final answer of a later round in the API's own shape (served as a
// JSON body: a streamed request answered with a body is read as that body).
func (a trafficAPI) final() string {
	switch a {
	case apiAnthropic:
		return anthMessage("end_turn", anthText(trafficFinal))
	case apiOllamaNative:
		b, _ := json.Marshal(trafficFinal)
		return `{"model":"fake","created_at":"2026-12-05T00:00:00Z","message":{"role":"assistant","content":` + string(b) + `},"done":true,"done_reason":"stop",` +
			`"prompt_eval_count":10,"eval_count":5}`
	case apiResponses:
		b, _ := json.Marshal(trafficFinal)
		return `{"id":"resp_it","object":"response","created_at":1700000000,"status":"completed","model":"fake","output":[` +
			`{"type":"message","id":"msg_it","status":"completed","role":"assistant","content":[{"type":"output_text","text":` + string(b) + `,"annotations":[]}]}],` +
			`"usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15}}`
	}
	return answer(trafficFinal)
}

// trafficFile is one corpus file as the replay server serves it to one adapter, and what it
// was asked.
type trafficFile struct {
	entry  traffic.Entry
	shape  traffic.Shape
	api    trafficAPI
	status int
	data   []byte

	mu    sync.Mutex
	first []trafficRequest // round-1 requests (answered with the recording)
	later []trafficRequest // requests of later rounds (answered with trafficFinal)
}

type trafficRequest struct {
	path   string
	stream bool
	body   string // kept for later rounds only
}

func (f *trafficFile) requests() (first, later []trafficRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]trafficRequest(nil), f.first...), append([]trafficRequest(nil), f.later...)
}

// trafficModel is the model name the turn of a file on an adapter asks for: the server finds
// the file by it.
func trafficModel(api trafficAPI, file string) string { return "traffic/" + string(api) + "/" + file }

var statusInKind = regexp.MustCompile(`\bHTTP (\d{3})\b`)

// trafficStatus is the HTTP status a file is served with: the manifest's http_status; for an
// error body whose cassette kept none, the status its kind names ("error body HTTP 502 ...":
// only the body was logged); 200 otherwise.
func trafficStatus(e traffic.Entry) int {
	if e.HTTPStatus == nil && strings.Contains(e.File, "_error_") {
		if m := statusInKind.FindStringSubmatch(e.Kind); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
	}
	return e.Status()
}

// newTrafficServer replays every file of entries to each of its adapters (apisOf): a request
// is routed to its file by the model it names; round 1 of the turn (a request carrying no assistant message yet) gets the recorded
// bytes, streamed event by event for a stream, every later round trafficFinal.
func newTrafficServer(t *testing.T, dir string, entries []traffic.Entry) (*httptest.Server, []*trafficFile) {
	t.Helper()
	files := map[string]*trafficFile{}
	var cases []*trafficFile
	for _, e := range entries {
		shape, err := e.Shape()
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, e.File))
		if err != nil {
			t.Fatalf("the provider-traffic corpus is required: %v", err)
		}
		for _, api := range apisOf(shape) {
			f := &trafficFile{entry: e, shape: shape, api: api, status: trafficStatus(e), data: data}
			files[trafficModel(api, e.File)] = f
			cases = append(cases, f)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Model    string          `json:"model"`
			Stream   bool            `json:"stream"`
			Messages []trafficItem   `json:"messages"`
			Input    json.RawMessage `json:"input"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
			return
		}
		f := files[req.Model]
		if f == nil {
			http.Error(w, `{"error":{"message":"no recording for this model"}}`, http.StatusNotFound)
			return
		}
		later := laterRound(req.Messages, req.Input)
		f.mu.Lock()
		if later {
			f.later = append(f.later, trafficRequest{path: r.URL.Path, stream: req.Stream, body: string(body)})
		} else {
			f.first = append(f.first, trafficRequest{path: r.URL.Path, stream: req.Stream})
		}
		f.mu.Unlock()
		if r.URL.Path != f.api.path() {
			http.Error(w, `{"error":{"message":"wrong endpoint for this recording"}}`, http.StatusNotFound)
			return
		}
		if later {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, f.api.final())
			return
		}
		f.serve(w)
	}))
	t.Cleanup(srv.Close)
	return srv, cases
}

// trafficItem is an entry of a request's messages (chat, Anthropic) or input (Responses).
type trafficItem struct {
	Role string `json:"role"`
	Type string `json:"type"`
}

// laterRound reports whether a request carries the turn's earlier answer (an assistant
// message, or a Responses function call, output or reasoning item).
func laterRound(msgs []trafficItem, input json.RawMessage) bool {
	var items []trafficItem
	_ = json.Unmarshal(input, &items) // a string input (or none) has no earlier answer
	for _, m := range append(msgs, items...) {
		switch {
		case m.Role == "assistant", m.Type == "function_call", m.Type == "function_call_output", m.Type == "reasoning":
			return true
		}
	}
	return false
}

// serve writes the recording: an error body with its status; a stream (the recorded bytes cut
// at each SSE event's blank line or each NDJSON line) flushed piece by piece; a body whole,
// as application/json, whatever the request asked (the adapters read a body answering a
// streamed request as that body).
func (f *trafficFile) serve(w http.ResponseWriter) {
	var sep []byte
	switch {
	case f.status != http.StatusOK:
		w.Header().Set("Content-Type", "application/json")
	case f.shape == traffic.ShapeOllamaNDJSON:
		w.Header().Set("Content-Type", "application/x-ndjson")
		sep = []byte("\n")
	case f.entry.Streamed:
		w.Header().Set("Content-Type", "text/event-stream")
		sep = []byte("\n\n")
	default:
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(f.status)
	if sep == nil {
		_, _ = w.Write(f.data)
		return
	}
	fl, _ := w.(http.Flusher)
	rest := f.data
	for len(rest) > 0 {
		piece := rest
		if i := bytes.Index(rest, sep); i >= 0 {
			piece = rest[:i+len(sep)]
		}
		rest = rest[len(piece):]
		if _, err := w.Write(piece); err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
		time.Sleep(trafficEventGap)
	}
}

// trafficTurn is one file's turn.
type trafficTurn struct {
	file *trafficFile
	run  client.WorkflowRun
}

// TestProviderTraffic: every file of ../shared/provider-traffic, replayed over HTTP to the real
// adapter of its API, is read by a real turn exactly as its manifest says, or refused for a
// reason the manifest accepts (issue 31 item 2).
//
// One store, one replay server and four in-process workers (one per adapter, each with
// Activities.Events set, so Infer consumes the provider's stream as a worker does by default:
// activities.complete calls Stream); every turn is started first and they run concurrently,
// then one subtest per file (and adapter) judges its turn. The recorded calls name tools this
// registry does not have: the executor sees each one and rejects it at stage 1 (resolve,
// unknown_capability), which is what is asserted, with nothing executed. A later round (the
// model asked again after the rejections) gets a plain final answer, so the turn ends.
func TestProviderTraffic(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(repoRoot, "..", "shared", "provider-traffic")
	entries, err := traffic.Load(dir)
	if err != nil {
		t.Fatalf("the provider-traffic corpus is required at %s: %v", dir, err)
	}
	began := time.Now()
	e := newDurEnv(t)
	srv, cases := newTrafficServer(t, dir, entries)

	chat, err := inference.NewOpenAI(inference.OpenAIConfig{BaseURL: srv.URL + "/v1", APIKey: "k", Model: "unused"})
	if err != nil {
		t.Fatal(err)
	}
	ollama, err := inference.NewOllama(inference.OpenAIConfig{BaseURL: srv.URL, Model: "unused"})
	if err != nil {
		t.Fatal(err)
	}
	anth, err := inference.NewAnthropic(inference.AnthropicConfig{BaseURL: srv.URL, APIKey: "x", Model: "unused"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := inference.NewOpenAIResponses(inference.OpenAIConfig{BaseURL: srv.URL + "/v1", APIKey: "k", Model: "unused"})
	if err != nil {
		t.Fatal(err)
	}
	queues := map[trafficAPI]string{}
	for api, p := range map[trafficAPI]inference.Streamer{apiChat: chat, apiOllamaNative: ollama, apiAnthropic: anth, apiResponses: resp} {
		queues[api] = e.queue + "-" + string(api)
		startTrafficWorker(t, e, p, queues[api])
	}

	turns := make([]trafficTurn, len(cases))
	for i, f := range cases {
		turns[i].file = f
		req := workflows.TurnRequest{Message: "provider-traffic replay of " + f.entry.File, Model: trafficModel(f.api, f.entry.File)}
		turns[i].run, _ = e.startTurn(fmt.Sprintf("traffic-%02d", i), 1, req, func(o *client.StartWorkflowOptions) {
			o.TaskQueue = queues[f.api]
			o.WorkflowTaskTimeout = workflows.WorkflowTaskTimeout
		})
	}

	// One subtest per file, one inside it per adapter the file was replayed to: a failure
	// names both.
	for i := 0; i < len(turns); {
		file := turns[i].file.entry.File
		j := i
		for j < len(turns) && turns[j].file.entry.File == file {
			j++
		}
		t.Run(file, func(t *testing.T) {
			for _, tt := range turns[i:j] {
				t.Run(string(tt.file.api), func(t *testing.T) { checkTrafficTurn(t, e, tt) })
			}
		})
		i = j
	}
	if n := e.rec.total(); n != 0 {
		t.Errorf("capabilities ran %d times; no recorded call may run", n)
	}
	t.Logf("%d files through %d real turns in %s", len(entries), len(turns), time.Since(began).Round(time.Millisecond))
}

// startTrafficWorker runs an in-process worker on queue serving p as the live model, with
// client-stream events on (as workers.Build sets them unless AIRLOCK_STREAM=0), so Infer takes
// the streamed path.
func startTrafficWorker(t *testing.T, e *durEnv, p inference.Streamer, queue string) {
	t.Helper()
	st, err := store.Open(context.Background(), e.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	acts := &activities.Activities{Registry: e.reg, Store: st, Live: p, ApproverKey: e.key, Approvers: testApprovers(), Clients: testClients(),
		Events: stream.Writer{Store: st}}
	w := workers.New(e.c, acts, queue)
	if err := w.Start(); err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(); st.Close() })
}

// providerFailure matches inference.ProviderError's message as it reaches the turn's failure.
var providerFailure = regexp.MustCompile(`inference: (openai|anthropic|openai-responses|ollama): provider (error|rejected the request): HTTP (\d{3})`)

// checkTrafficTurn judges one file's turn against its manifest line.
//
// How a refusal shows, and so what is asserted (read from workflows/turn.go and
// activities/fold.go):
//   - A provider error (an HTTP error status, an error body or event) fails the Infer activity:
//     a non-retryable one (4xx but 408/409/429, a Responses error event whose code says the
//     request cannot succeed) after one request, a retryable one after trafficInferAttempts.
//     The turn fails with the adapter's *inference.ProviderError in its failure and its result
//     is stored failed ("error: ..."), and audited once as turn_failed with the error. No
//     proposal exists; that failure is what is asserted as refused "provider_error".
//   - A message the parser refuses whole (refusal, truncated, unread_part, stream_fault,
//     abnormal_finish: parse.Result.Incomplete) is recorded in the round's Infer result in
//     the turn's history (FoldedRound.Parsed) and audited once as message_incomplete with the
//     reason and its detail (activities.AuditMessageIncomplete), calls or none. Its calls, if
//     any, are parse failures with that reason, each audited parse_failed.
//
// For an exact reading the Infer result must read as the manifest says, each expected call must
// reach the executor (the turn result's outcome: its id, name and arguments, rejected at
// resolve; its audit row: the same call id and verdict), and a streamed file's deltas must
// have been written as client-stream events.
func checkTrafficTurn(t *testing.T, e *durEnv, tt trafficTurn) {
	f, en := tt.file, tt.file.entry
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res workflows.TurnResult
	runErr := tt.run.Get(ctx, &res)
	first, later := f.requests()
	id := tt.run.GetID()

	// Every round-1 request went to the adapter's endpoint and asked to stream: the streamed
	// path ran (Complete never sets stream), for bodies as for streams.
	if len(first) == 0 {
		t.Fatalf("the recording was never asked for (turn: %v)", runErr)
	}
	for i, r := range first {
		if r.path != f.api.path() || !r.stream {
			t.Errorf("round-1 request %d: %s stream=%v, want %s stream=true", i, r.path, r.stream, f.api.path())
		}
	}
	audit, err := e.st.ListAudit(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range audit {
		if a.Outcome == string(activities.OutcomeExecuted) {
			t.Errorf("audit: %s executed (#%d %s)", a.CapabilityID, a.Seq, a.CallID)
		}
	}

	inf, inferred := firstInfer(t, e.c, id)
	if inferred && inf.Folded != nil && inf.Folded.ParseError != "" {
		// Not a provider response at all (parse.ErrUnrecognized): the turn fails with it.
		if d := en.Check(traffic.Reading{Err: errors.New(inf.Folded.ParseError)}); d != nil {
			t.Errorf("%s (%s):\n  %s\n  (turn: %v)", en.File, en.Kind, strings.Join(d, "\n  "), runErr)
		}
		if runErr == nil {
			t.Errorf("the turn completed (%s) on a response that is no provider response", res.EndReason)
		}
		return
	}
	if runErr != nil {
		checkFailedTrafficTurn(t, e, tt, runErr, first, audit)
		return
	}
	if !inferred || inf.Folded == nil {
		t.Fatalf("turn %s completed (%s) with no round-1 Infer result in its history", id, res.EndReason)
	}
	parsed := inf.Folded.Parsed
	if d := en.Check(readingOfParse(parsed)); d != nil {
		t.Errorf("round 1 of the real turn read %s (%s) wrongly:\n  %s\n  (response %s)", en.File, en.Kind, strings.Join(d, "\n  "), excerpt(inf.Response.Raw))
	}
	if len(first) != 1 {
		t.Errorf("the recording was asked %d times, want once (a retry would hide what the first answer did)", len(first))
	}
	if res.Status != workflows.StatusCompleted {
		t.Errorf("turn status %q (%s)", res.Status, res.EndReason)
	}

	// The executor saw every call of the message, in order, as the model sent it.
	round1 := 0
	for _, o := range res.Outcomes {
		if o.Round == 1 {
			round1++
		}
	}
	if round1 != len(parsed.Calls) {
		t.Fatalf("%d proposals of round 1 reached the executor, the message had %d calls (outcomes %s)", round1, len(parsed.Calls), outcomeList(res))
	}
	bySeq := map[int]store.AuditEvent{}
	for _, a := range audit {
		if a.Outcome == string(activities.OutcomeRejected) || a.Outcome == string(activities.OutcomeParseFailed) {
			bySeq[a.Seq] = a
		}
	}
	for i, c := range parsed.Calls {
		o := res.Outcomes[i]
		if o.Round != 1 || o.CallID != c.CallID || o.CallIDAssigned != c.IDAssigned || o.Name != c.Name {
			t.Errorf("proposal %d: %+v, want the call %s %q (assigned %v)", i, o, c.Name, c.CallID, c.IDAssigned)
		}
		a, ok := bySeq[o.Seq]
		if !ok {
			t.Errorf("proposal #%d (%s): no audit row of its outcome", o.Seq, o.Name)
		} else if a.CallID != c.CallID || a.Outcome != string(o.Outcome) || a.Stage != string(o.Stage) || a.Reason != o.Reason {
			t.Errorf("proposal #%d: audit %s/%s/%s call %q, turn result %s/%s/%s call %q", o.Seq, a.Outcome, a.Stage, a.Reason, a.CallID, o.Outcome, o.Stage, o.Reason, c.CallID)
		}
		if en.Refused() {
			// A call of a refused message is a parse failure carrying the message's reason.
			if o.Outcome != activities.OutcomeParseFailed || o.Stage != activities.StageParse || !contains(en.Expect.RefuseAs, o.Reason) {
				t.Errorf("proposal #%d of a refused message: %s/%s/%s, want parse_failed with one of %v", o.Seq, o.Outcome, o.Stage, o.Reason, en.Expect.RefuseAs)
			}
			continue
		}
		w := en.Expect.Calls[i]
		if o.Name != w.Name {
			t.Errorf("proposal #%d: name %q reached the executor, want %q", o.Seq, o.Name, w.Name)
		}
		if w.ID != nil && *w.ID != "" && o.CallID != *w.ID {
			t.Errorf("proposal #%d: call id %q, want the provider's %q", o.Seq, o.CallID, *w.ID)
		}
		if (w.ID == nil || *w.ID == "") && (!o.CallIDAssigned || o.CallID == "") {
			t.Errorf("proposal #%d: call id %q assigned=%v, want an id Airlock assigned (the provider sent none)", o.Seq, o.CallID, o.CallIDAssigned)
		}
		if !traffic.JSONEqual(string(o.Arguments), w.Arguments) {
			t.Errorf("proposal #%d: arguments %s reached the executor, want %s", o.Seq, o.Arguments, w.Arguments)
		}
		if o.Outcome != activities.OutcomeRejected || o.Stage != activities.StageResolve || o.Reason != registry.RefusalUnregistered {
			t.Errorf("proposal #%d (%s): %s/%s/%s, want rejected at resolve (%s): no such tool is registered", o.Seq, o.Name, o.Outcome, o.Stage, o.Reason, registry.RefusalUnregistered)
		}
	}

	switch {
	case len(parsed.Calls) > 0:
		// The rejections went back to the model, which answered once more.
		if res.EndReason != workflows.EndAnswered || res.Rounds != 2 || res.Prose != trafficFinal || len(later) != 1 {
			t.Errorf("after the calls: end %q, %d rounds, prose %q, %d later requests; want answered in round 2", res.EndReason, res.Rounds, res.Prose, len(later))
		}
		// Round 2 went back to the same adapter with each call echoed and answered by its
		// result: the call id twice (the call, and the tool result that answers it); Ollama's
		// native API has no call ids on the wire and matches a result by its tool_name.
		for _, c := range parsed.Calls {
			key := c.CallID
			if f.api == apiOllamaNative {
				key = c.Name
			}
			if len(later) > 0 && strings.Count(later[0].body, strconv.Quote(key)) < 2 {
				t.Errorf("round 2's request does not echo and answer call %q (%s): %s", c.CallID, c.Name, excerpt([]byte(later[0].body)))
			}
		}
	case en.Refused():
		if res.EndReason != workflows.EndIncomplete || res.Rounds != 1 || len(later) != 0 {
			t.Errorf("refused message: end %q after %d rounds (%d later requests), want %q in round 1", res.EndReason, res.Rounds, len(later), workflows.EndIncomplete)
		}
	default:
		if res.EndReason != workflows.EndAnswered || res.Rounds != 1 || res.Prose != en.Expect.Text || len(later) != 0 {
			t.Errorf("answer: end %q after %d rounds, prose %q; want answered in round 1 with %q", res.EndReason, res.Rounds, res.Prose, en.Expect.Text)
		}
	}
	want := len(parsed.Calls)
	if en.Refused() {
		// The refused message itself: one row with the reason the Infer result gives.
		want++
		n := 0
		for _, a := range audit {
			if a.Outcome == activities.AuditMessageIncomplete {
				n++
				if a.Reason != string(parsed.Incomplete) || !contains(en.Expect.RefuseAs, a.Reason) || a.Detail == "" || a.Stage != string(activities.StageParse) {
					t.Errorf("message_incomplete row %+v, want reason %q (one of %v) with its detail", a, parsed.Incomplete, en.Expect.RefuseAs)
				}
			}
		}
		if n != 1 {
			t.Errorf("%d message_incomplete audit rows, want 1: %+v", n, audit)
		}
	}
	if len(audit) != want {
		t.Errorf("%d audit rows, want %d (one per call, and one for a refused message): %+v", len(audit), want, audit)
	}
	if f.entry.Streamed && !en.Refused() {
		checkTrafficDeltas(t, e, id, en)
	}
}

// checkFailedTrafficTurn judges a turn that failed: only a provider error may fail it, as a
// refusal the manifest accepts as provider_error, after the attempts its retryability allows.
func checkFailedTrafficTurn(t *testing.T, e *durEnv, tt trafficTurn, runErr error, first []trafficRequest, audit []store.AuditEvent) {
	en := tt.file.entry
	m := providerFailure.FindStringSubmatch(runErr.Error())
	reading := traffic.Reading{Err: runErr}
	if m != nil {
		reading = traffic.Reading{Refused: "provider_error", Detail: runErr.Error()}
	}
	if d := en.Check(reading); d != nil {
		t.Fatalf("the turn failed: %s (%s):\n  %s", en.File, en.Kind, strings.Join(d, "\n  "))
	}
	if m == nil {
		t.Fatalf("the turn failed with no provider error: %v", runErr)
	}
	if status, _ := strconv.Atoi(m[3]); status != tt.file.status {
		t.Errorf("the provider error says HTTP %d, the recording was served with %d", status, tt.file.status)
	}
	// 4xx but 408, 409 and 429 are asked once, as is an error event whose code says the same
	// request cannot succeed (the adapter: "provider rejected the request"); every other
	// provider error is retried until the Infer activity's attempts are spent.
	want := trafficInferAttempts
	if m[2] == "rejected the request" {
		want = 1
	}
	if len(first) != want {
		t.Errorf("the recording was asked %d times, want %d (%s)", len(first), want, m[0])
	}
	// No proposal exists; the failed turn itself is audited once, with the provider's error.
	if len(audit) != 1 || audit[0].Outcome != activities.AuditTurnFailed || !providerFailure.MatchString(audit[0].Detail) {
		t.Errorf("audit rows %+v: want one %s row naming the provider error", audit, activities.AuditTurnFailed)
	}
	raw, err := e.st.GetTurnResult(context.Background(), tt.run.GetID())
	if err != nil {
		t.Fatalf("the failed turn's result was not stored: %v", err)
	}
	var stored workflows.TurnResult
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	if stored.Status != workflows.StatusFailed || !providerFailure.MatchString(stored.EndReason) || len(stored.Outcomes) != 0 {
		t.Errorf("stored result: %s %q, %d outcomes; want failed with the provider error", stored.Status, stored.EndReason, len(stored.Outcomes))
	}
}

// checkTrafficDeltas: a streamed answer went out as client-stream events while it streamed
// (activities.complete → Stream with the round's sink): the text deltas of round 1's first
// attempt add up to the manifest's text, and a TOOL_CALL_START names each expected call.
func checkTrafficDeltas(t *testing.T, e *durEnv, id string, en traffic.Entry) {
	msg := id + "/r1/a1"
	var text strings.Builder
	var names []string
	for after := int64(0); ; {
		evs, err := e.st.StreamEvents(context.Background(), id, after, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			after = ev.Seq
			var p struct {
				MessageID       string `json:"messageId"`
				ParentMessageID string `json:"parentMessageId"`
				Delta           string `json:"delta"`
				ToolCallName    string `json:"toolCallName"`
			}
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				t.Fatal(err)
			}
			switch {
			case ev.Type == stream.TextMessageContent && p.MessageID == msg:
				text.WriteString(p.Delta)
			case ev.Type == stream.ToolCallStart && p.ParentMessageID == msg:
				names = append(names, p.ToolCallName)
			}
		}
	}
	if text.String() != en.Expect.Text {
		t.Errorf("streamed text deltas %q, want %q", text.String(), en.Expect.Text)
	}
	var want []string
	for _, c := range en.Expect.Calls {
		want = append(want, c.Name)
	}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("streamed calls %v, want %v", names, want)
	}
}

// firstInfer decodes the turn's first completed Infer activity result (round 1) from its
// history.
func firstInfer(t *testing.T, c client.Client, id string) (activities.InferOutput, bool) {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	scheduled := map[int64]string{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			scheduled[ev.GetEventId()] = a.GetActivityType().GetName()
		}
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil && scheduled[a.GetScheduledEventId()] == "Infer" {
			var out activities.InferOutput
			if err := converter.GetDefaultDataConverter().FromPayloads(a.GetResult(), &out); err != nil {
				t.Fatalf("decode the Infer result: %v", err)
			}
			return out, true
		}
	}
	return activities.InferOutput{}, false
}

// readingOfParse is a parse in the manifest's terms.
func readingOfParse(res parse.Result) traffic.Reading {
	r := traffic.Reading{Text: res.Text, FinishReason: res.FinishReason, Refused: string(res.Incomplete), Detail: res.IncompleteDetail}
	for _, c := range res.Calls {
		r.Calls = append(r.Calls, traffic.ReadCall{ID: c.CallID, Assigned: c.IDAssigned, Name: c.Name, Arguments: string(c.Arguments), Reason: string(c.Reason)})
	}
	return r
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func excerpt(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}
