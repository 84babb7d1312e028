package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/airlock-dev/airlock/internal/appapi"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/workers"
)

// apiKeys of the API under test: a requester for alice, one for mallory, an approver (bob),
// and a key that is both alice's requester and an approver (alice): four-eyes refuses it.
var apiKeys = map[string]string{}

// apiStack is a worker, its store, and the application API served in process, with the
// OpenAPI router that every request and response of the tests is validated against.
type apiStack struct {
	url    string
	srv    *appapi.Server
	router routers.Router
	t      *testing.T
}

// plainBody decodes a text body (SSE, YAML) as the string the document's schema describes.
func plainBody(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	b, err := io.ReadAll(body)
	return string(b), err
}

func init() {
	openapi3filter.RegisterBodyDecoder("text/event-stream", plainBody)
	openapi3filter.RegisterBodyDecoder("application/yaml", plainBody)
}

func newAPIStack(t *testing.T, model *modelServer) *apiStack {
	t.Helper()
	return newAPIStackAt(t, model.URL)
}

// newAPIStackAt is newAPIStack on the OpenAI-compatible model server at modelURL.
func newAPIStackAt(t *testing.T, modelURL string) *apiStack {
	t.Helper()
	t.Setenv("AIRLOCK_OPENAI_BASE_URL", modelURL+"/v1")
	t.Setenv("AIRLOCK_OPENAI_API_KEY", "test")
	c := dial(t)
	cfg := testConfig(t)
	cfg.FetchAllow = []string{"127.0.0.0/8"}
	startWorker(t, c, cfg)
	st := openStore(t, cfg)
	var callers []appapi.Caller
	for _, x := range []appapi.Caller{{Name: "app-alice", Principal: "alice"}, {Name: "app-mallory", Principal: "mallory"},
		{Name: "ops-bob", Approver: "bob"}, {Name: "alice-both", Principal: "alice", Approver: "alice"}} {
		key, sum, err := appapi.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		apiKeys[x.Name] = key
		x.KeySHA256 = sum
		callers = append(callers, x)
	}
	keys, err := appapi.NewKeys(callers)
	if err != nil {
		t.Fatal(err)
	}
	surface, err := approvers.NewCredential("surface:api-it-" + cfg.TaskQueue)
	if err != nil {
		t.Fatal(err)
	}
	if err := approvers.AddSurface(itApprovers, approvers.Surface{Name: "api-it-" + cfg.TaskQueue, PublicKey: surface.Public()}); err != nil {
		t.Fatal(err)
	}
	key, err := workers.ApproverKey(cfg)
	if err != nil {
		t.Fatal(err)
	}
	starter, err := clients.LoadCredential(itStarterFile)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := appapi.New(appapi.Options{Store: st, Temporal: c, TaskQueue: cfg.TaskQueue, Keys: keys, Starter: starter,
		ApproverKey: key, Surface: surface, Approvers: approvers.NewSource(itApprovers).Current, MaxStreamsPerCaller: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	doc, err := openapi3.NewLoader().LoadFromData(appapi.OpenAPI)
	if err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml does not validate: %v", err)
	}
	doc.Servers = openapi3.Servers{{URL: hs.URL}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &apiStack{url: hs.URL, srv: srv, router: router, t: t}
}

// do sends a request as caller (a name in apiKeys, "" for none) and validates both the request
// and the response against openapi.yaml (kin-openapi's openapi3filter): every handler's real
// answers are checked, errors included.
func (a *apiStack) do(method, path, caller string, body any, hdr map[string]string) (int, []byte, http.Header) {
	a.t.Helper()
	var rd io.Reader
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, a.url+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if caller != "" {
		req.Header.Set("Authorization", "Bearer "+apiKeys[caller])
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	route, params, err := a.router.FindRoute(req)
	if err != nil {
		a.t.Fatalf("%s %s: no route in openapi.yaml: %v", method, path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if body != nil {
		req.Body = io.NopCloser(bytes.NewReader(raw))
	}
	reqErr := openapi3filter.ValidateRequest(context.Background(), in)
	if body != nil {
		req.Body = io.NopCloser(bytes.NewReader(raw))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if reqErr != nil && resp.StatusCode < 400 {
		a.t.Errorf("%s %s: the server accepted (%d) a request openapi.yaml refuses: %v", method, path, resp.StatusCode, reqErr)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	out.SetBodyBytes(b)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		a.t.Errorf("%s %s: response %d does not match openapi.yaml: %v\n%s", method, path, resp.StatusCode, err, b)
	}
	return resp.StatusCode, b, resp.Header
}

// sseRead reads server-sent events from an open response until stop returns true or the
// stream ends.
func sseRead(t *testing.T, body io.Reader, stop func(sseEvent) bool) []sseEvent {
	t.Helper()
	var out []sseEvent
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Type != "" {
				out = append(out, ev)
				if stop(ev) {
					return out
				}
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			ev.ID = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.Type = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.Data = json.RawMessage(line[6:])
		}
	}
	return out
}

func (a *apiStack) follow(ctx context.Context, path, caller, lastID string) *http.Response {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+apiKeys[caller])
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	a.t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		a.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return resp
}

// TestAppAPITurnLifecycle: a requester starts a turn over HTTP (idempotently), follows its
// events, an approver lists and decides its confirmation, the requester reads the result;
// scoping, four-eyes, 404s and the OpenAPI contract are checked on the way.
func TestAppAPITurnLifecycle(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "page text \u202e hostile")
	}))
	t.Cleanup(target.Close)
	model := newFakeModel(t, calls(call("c1", "web_fetch", fmt.Sprintf(`{"url":"%s/page"}`, target.URL))))
	a := newAPIStack(t, model)
	if a.srv.Polling() {
		t.Error("followers poll the store: LISTEN/NOTIFY is not in use on PostgreSQL")
	}
	conv := "api-" + strings.ReplaceAll(t.Name(), "/", "-")[:12] + fmt.Sprint(time.Now().UnixNano()%100000)

	// Unknown turns: 404 at once, also for an existing turn of another principal below.
	start := time.Now()
	if code, _, _ := a.do("GET", "/v1/conversations/nope/turns/1/events", "app-alice", nil, nil); code != 404 {
		t.Fatalf("unknown turn's events: %d", code)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("unknown turn answered after %s", d)
	}
	if code, _, _ := a.do("GET", "/v1/conversations/nope/turns/1", "", nil, nil); code != 401 {
		t.Fatalf("no key: %d", code)
	}

	body := map[string]any{"conversation": conv, "message": "fetch the page"}
	hdr := map[string]string{"Idempotency-Key": "k-1"}
	code, b, _ := a.do("POST", "/v1/turns", "app-alice", body, hdr)
	if code != 201 {
		t.Fatalf("start: %d %s", code, b)
	}
	var turn appapi.Turn
	_ = json.Unmarshal(b, &turn)
	code, b, _ = a.do("POST", "/v1/turns", "app-alice", body, hdr)
	var again appapi.Turn
	_ = json.Unmarshal(b, &again)
	if code != 200 || again.ID != turn.ID {
		t.Fatalf("same request, same key: %d %s (first %s)", code, b, turn.ID)
	}
	if code, b, _ = a.do("POST", "/v1/turns", "app-alice", map[string]any{"conversation": conv, "message": "something else"}, hdr); code != 409 {
		t.Fatalf("other body, same key: %d %s", code, b)
	}
	if code, _, _ = a.do("POST", "/v1/turns", "app-alice", body, nil); code != 400 {
		t.Fatalf("no Idempotency-Key: %d", code)
	}
	if code, b, _ = a.do("POST", "/v1/turns", "app-mallory", map[string]any{"conversation": conv, "message": "let me in"}, map[string]string{"Idempotency-Key": "m-1"}); code != 403 {
		t.Fatalf("mallory in alice's conversation: %d %s", code, b)
	}
	if code, _, _ = a.do("GET", turn.EventsURL[:len(turn.EventsURL)-len("/events")], "app-mallory", nil, nil); code != 404 {
		t.Fatalf("mallory reads alice's turn: %d", code)
	}

	// Follow: the confirmation is announced as a CUSTOM airlock.interrupt.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	resp := a.follow(ctx, turn.EventsURL, "app-alice", "")
	evs := sseRead(t, resp.Body, func(ev sseEvent) bool {
		return ev.Type == "CUSTOM" && strings.Contains(string(ev.Data), `"airlock.interrupt"`)
	})
	resp.Body.Close()
	if len(evs) == 0 || !strings.Contains(string(evs[len(evs)-1].Data), `"airlock.interrupt"`) {
		t.Fatalf("no interrupt in %d events", len(evs))
	}
	lastID := ""
	for _, e := range evs {
		if e.ID != "" {
			lastID = e.ID
		}
		if e.Type == "RUN_STARTED" && (!strings.Contains(string(e.Data), `"threadId":"`+conv+`"`) || !strings.Contains(string(e.Data), `"runId"`)) {
			t.Errorf("RUN_STARTED without threadId/runId: %s", e.Data)
		}
	}

	// Streams per caller are bounded (4 in this stack): a fifth open follower is refused.
	hold, release := context.WithCancel(ctx)
	for range 4 {
		a.follow(hold, turn.EventsURL, "app-alice", "")
	}
	if code, b, h := a.do("GET", turn.EventsURL, "app-alice", nil, nil); code != 429 || h.Get("Retry-After") == "" {
		t.Fatalf("fifth stream: %d %s", code, b)
	}
	release()
	time.Sleep(500 * time.Millisecond) // the held streams' handlers notice their clients left

	// The requester's status shows the pending call, which it may not decide.
	code, b, _ = a.do("GET", turn.EventsURL[:len(turn.EventsURL)-len("/events")], "app-alice", nil, nil)
	var st appapi.Turn
	_ = json.Unmarshal(b, &st)
	if code != 200 || st.Status != "awaiting-confirmation" || len(st.Pending) != 1 || st.Pending[0].MayDecide {
		t.Fatalf("status: %d %s", code, b)
	}
	cf := st.Pending[0]

	// Approvers: bob sees it and may decide; alice-both (alice's own turn) neither sees nor decides it.
	code, b, _ = a.do("GET", "/v1/confirmations?conversation="+conv, "ops-bob", nil, nil)
	if code != 200 || !strings.Contains(string(b), cf.ID) || !strings.Contains(string(b), `"may_decide":true`) {
		t.Fatalf("bob's confirmations: %d %s", code, b)
	}
	if code, b, _ = a.do("GET", "/v1/confirmations?conversation="+conv, "alice-both", nil, nil); code != 200 || strings.Contains(string(b), cf.ID) {
		t.Fatalf("alice-both's confirmations: %d %s", code, b)
	}
	if code, _, _ = a.do("GET", "/v1/confirmations", "app-alice", nil, nil); code != 403 {
		t.Fatalf("a requester lists confirmations: %d", code)
	}
	dec := map[string]any{"decision": "approve", "args_digest": cf.ArgsDigest}
	if code, b, _ = a.do("POST", "/v1/confirmations/"+cf.ID+"/decision", "alice-both", dec, nil); code != 403 || !strings.Contains(string(b), "approver_is_requester") {
		t.Fatalf("four-eyes: %d %s", code, b)
	}
	if code, b, _ = a.do("POST", "/v1/confirmations/"+cf.ID+"/decision", "ops-bob", map[string]any{"decision": "approve", "args_digest": "sha256:stale"}, nil); code != 409 {
		t.Fatalf("stale digest: %d %s", code, b)
	}
	// Resume after the last id seen: the stream announces the pending call again, then
	// carries the decision, the tool result and exactly one RUN_FINISHED.
	resp = a.follow(ctx, turn.EventsURL, "app-alice", lastID)
	got := make(chan []sseEvent, 1)
	go func() {
		got <- sseRead(t, resp.Body, func(ev sseEvent) bool { return ev.Type == "RUN_FINISHED" || ev.Type == "RUN_ERROR" })
	}()
	if code, b, _ = a.do("POST", "/v1/confirmations/"+cf.ID+"/decision", "ops-bob", dec, nil); code != 200 {
		t.Fatalf("bob approves: %d %s", code, b)
	}
	if code, b, _ = a.do("POST", "/v1/confirmations/"+cf.ID+"/decision", "ops-bob", dec, nil); code != 409 {
		t.Fatalf("a second decision: %d %s", code, b)
	}
	var rest []sseEvent
	select {
	case rest = <-got:
	case <-ctx.Done():
		t.Fatal("no RUN_FINISHED after the decision")
	}
	var types []string
	finishedN := 0
	for _, e := range rest {
		types = append(types, e.Type)
		if e.Type == "RUN_FINISHED" {
			finishedN++
			if !strings.Contains(string(e.Data), `"outcome":{"type":"success"}`) || !strings.Contains(string(e.Data), `"threadId"`) {
				t.Errorf("RUN_FINISHED: %s", e.Data)
			}
		}
		if e.Type == "TOOL_CALL_RESULT" && (!strings.Contains(string(e.Data), `"toolCallId":"c1"`) || !strings.Contains(string(e.Data), `untrusted`)) {
			t.Errorf("TOOL_CALL_RESULT: %s", e.Data)
		}
	}
	if finishedN != 1 || !strings.Contains(strings.Join(types, " "), "TOOL_CALL_RESULT") {
		t.Fatalf("after resume: %v", types)
	}
	code, b, _ = a.do("GET", turn.EventsURL[:len(turn.EventsURL)-len("/events")], "app-alice", nil, nil)
	if code != 200 || !strings.Contains(string(b), `"status":"completed"`) || !strings.Contains(string(b), `"result"`) {
		t.Fatalf("final status: %d %s", code, b)
	}
	// A reconnect after the end gets the end again; the stream endpoint is in the contract too.
	code, b, _ = a.do("GET", turn.EventsURL, "app-alice", nil, map[string]string{"Last-Event-ID": "100000"})
	if code != 200 || !strings.Contains(string(b), "RUN_FINISHED") {
		t.Fatalf("reconnect after the end: %d %s", code, b)
	}
	// The AG-UI endpoint under the same contract: another principal learns nothing of the
	// thread; its requester re-attaches to the finished turn (one RUN_FINISHED).
	if code, b, _ = a.do("POST", "/v1/agui", "app-mallory", map[string]any{"threadId": conv, "runId": "r-m", "messages": []any{}}, nil); code != 404 {
		t.Fatalf("mallory's AG-UI run on alice's thread: %d %s", code, b)
	}
	code, b, _ = a.do("POST", "/v1/agui", "app-alice", map[string]any{"threadId": conv, "runId": "r-a", "messages": []any{}}, nil)
	if code != 200 || strings.Count(string(b), "event: RUN_FINISHED") != 1 || !strings.Contains(string(b), `"runId":"r-a"`) {
		t.Fatalf("alice's AG-UI re-attach: %d %s", code, b)
	}
	if code, b, _ = a.do("GET", "/v1/openapi.yaml", "", nil, nil); code != 200 || !bytes.Contains(b, []byte("openapi: 3.1.0")) {
		t.Fatalf("openapi.yaml: %d", code)
	}
}

// TestAppAPIAuthLimits: keys below the strength floor are refused at load; failed
// authentications from one address are limited (429, even for a good key after that).
func TestAppAPIAuthLimits(t *testing.T) {
	if _, err := appapi.NewKeys([]appapi.Caller{{Name: "weak", Principal: "alice", Key: "x"}}); !errors.Is(err, appapi.ErrWeakKey) {
		t.Fatalf("1-character key: %v", err)
	}
	if _, err := appapi.NewKeys([]appapi.Caller{{Name: "weak", Principal: "alice", Key: strings.Repeat("ab", 40)}}); !errors.Is(err, appapi.ErrWeakKey) {
		t.Fatalf("repeated pattern: %v", err)
	}
	good, _, _ := appapi.NewKey()
	keys, err := appapi.NewKeys([]appapi.Caller{{Name: "ok", Principal: "alice", Key: good}})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t)
	cfg := testConfig(t)
	st := openStore(t, cfg)
	starter, _ := clients.LoadCredential(itStarterFile)
	srv, err := appapi.New(appapi.Options{Store: st, Temporal: c, Keys: keys, Starter: starter, AuthBurst: 3, AuthRefill: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	get := func(key string) int {
		req, _ := http.NewRequest("GET", hs.URL+"/v1/conversations/x/turns/1", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(good); code != 404 {
		t.Fatalf("good key, unknown turn: %d", code)
	}
	for i := range 3 {
		if code := get(fmt.Sprintf("guess-%d", i)); code != 401 {
			t.Fatalf("guess %d: %d", i, code)
		}
	}
	if code := get("guess-4"); code != 429 {
		t.Fatalf("4th failure: %d", code)
	}
	if code := get(good); code != 429 {
		t.Fatalf("good key while limited: %d", code)
	}
}

// aguiNPM is the folder scripts/ensure-agui-client.sh installs the official AG-UI client into.
func aguiNPM(t *testing.T) string {
	dir := os.Getenv("AIRLOCK_AGUI_NPM")
	if dir == "" {
		dir = filepath.Join(repoRoot, "bin", "agui")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@ag-ui", "client", "package.json")); err != nil {
		out, err := exec.Command(filepath.Join(repoRoot, "scripts", "ensure-agui-client.sh")).Output()
		if err != nil {
			t.Fatalf("install @ag-ui/client (scripts/ensure-agui-client.sh): %v", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	return dir
}

type aguiRun struct {
	OK         bool              `json:"ok"`
	Types      []string          `json:"types"`
	Finished   []json.RawMessage `json:"finished"`
	Interrupts []struct {
		ID         string         `json:"id"`
		ToolCallID string         `json:"toolCallId"`
		Metadata   map[string]any `json:"metadata"`
	} `json:"interrupts"`
	Messages json.RawMessage `json:"messages"`
	Error    string          `json:"error"`
	Status   int             `json:"status"`
}

// runAGUI runs integration/testdata/agui_run.mjs (HttpAgent) with env.
func runAGUI(t *testing.T, dir string, env ...string) aguiRun {
	t.Helper()
	script := filepath.Join(dir, "agui_run.mjs")
	src, err := os.ReadFile(filepath.Join(repoRoot, "integration", "testdata", "agui_run.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", script)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	var r aguiRun
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("node printed %s (%v)\n%s", out, err, stderr.String())
	}
	var shown []string
	for _, e := range env {
		if strings.HasPrefix(e, "MODE=") || strings.HasPrefix(e, "RUN=") {
			shown = append(shown, e)
		}
	}
	t.Logf("AG-UI client run (%s): ok=%v types=%v error=%q", strings.Join(shown, " "), r.OK, r.Types, r.Error)
	return r
}

// TestAGUIHttpAgent: the official @ag-ui/client HttpAgent (from npm) runs a turn through
// /v1/agui, its own schemas and event verifier accepting every event: the run ends in an
// interrupt (one RUN_FINISHED, outcome interrupt, saying who may decide); the requester's own
// resume is refused (four-eyes); the approver's resume approves it and the run finishes with a
// TOOL_CALL_RESULT; re-attaching to the finished turn replays it to one RUN_FINISHED success.
func TestAGUIHttpAgent(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed (scripts/ensure-agui-client.sh installs it)")
	}
	npm := aguiNPM(t)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "page text")
	}))
	t.Cleanup(target.Close)
	model := newFakeModel(t, calls(call("c1", "web_fetch", fmt.Sprintf(`{"url":"%s/page"}`, target.URL))))
	a := newAPIStack(t, model)
	thread := fmt.Sprintf("agui-%d", time.Now().UnixNano()%1000000)
	base := []string{"AIRLOCK_API_URL=" + a.url, "THREAD=" + thread, "NODE_PATH=" + filepath.Join(npm, "node_modules")}
	dir := filepath.Join(npm) // the script must sit beside node_modules to import it
	env := func(caller string, more ...string) []string {
		return append(append(append([]string{}, base...), "AIRLOCK_API_KEY="+apiKeys[caller]), more...)
	}
	r := runAGUI(t, dir, env("app-alice", "MODE=start", "RUN=run-1", "MESSAGE=fetch the page")...)
	if !r.OK || len(r.Finished) != 1 || len(r.Interrupts) != 1 || r.Types[0] != "RUN_STARTED" {
		t.Fatalf("start run: %+v", r)
	}
	if !strings.Contains(string(r.Finished[0]), `"type":"interrupt"`) || !strings.Contains(string(r.Finished[0]), `"threadId":"`+thread+`"`) {
		t.Fatalf("interrupt RUN_FINISHED: %s", r.Finished[0])
	}
	it := r.Interrupts[0]
	meta, _ := it.Metadata["airlock"].(map[string]any)
	if it.ToolCallID != "c1" || meta == nil || meta["mayDecide"] != false || meta["whoMayDecide"] == "" {
		t.Fatalf("interrupt: %+v", it)
	}
	// The interrupt carries the one presentation every approver surface shows: this call,
	// its arguments' digest, who asked, the quorum and the user's request.
	pres, _ := meta["presentation"].(map[string]any)
	quorum, _ := pres["quorum"].(map[string]any)
	request, _ := pres["user_request"].(map[string]any)
	if pres == nil || pres["capability"] != "web.fetch" || pres["args_digest"] != meta["argsDigest"] || pres["id"] != it.ID ||
		quorum == nil || quorum["needed"] != float64(1) || request == nil || !strings.Contains(fmt.Sprint(request["text"]), "fetch the page") {
		t.Fatalf("interrupt presentation: %v", meta["presentation"])
	}
	// Re-attach while waiting: the same interrupt, one RUN_FINISHED.
	r = runAGUI(t, dir, env("app-alice", "MODE=attach", "RUN=run-2")...)
	if !r.OK || len(r.Finished) != 1 || len(r.Interrupts) != 1 || r.Interrupts[0].ID != it.ID {
		t.Fatalf("attach to the waiting turn: %+v", r)
	}
	// The requester's own chat never approves its own call.
	r = runAGUI(t, dir, env("alice-both", "MODE=resume", "RUN=run-3", "INTERRUPT="+it.ID, "DECISION=approve")...)
	if r.OK || r.Status != 403 || !strings.Contains(r.Error, "approver_is_requester") {
		t.Fatalf("requester's resume: %+v", r)
	}
	// The approver's resume approves it; the run goes on to the end.
	r = runAGUI(t, dir, env("ops-bob", "MODE=resume", "RUN=run-4", "INTERRUPT="+it.ID, "DECISION=approve")...)
	if !r.OK || len(r.Finished) != 1 || !strings.Contains(string(r.Finished[0]), `"type":"success"`) || !strings.Contains(strings.Join(r.Types, " "), "TOOL_CALL_RESULT") {
		t.Fatalf("approver's resume: %+v", r)
	}
	// The finished turn, re-attached: replayed to one RUN_FINISHED success with the result.
	r = runAGUI(t, dir, env("app-alice", "MODE=attach", "RUN=run-5")...)
	if !r.OK || len(r.Finished) != 1 || !strings.Contains(string(r.Finished[0]), `"type":"success"`) || !strings.Contains(string(r.Finished[0]), "all done") {
		t.Fatalf("attach to the finished turn: %+v", r)
	}
}

// TestAGUITypeScriptExample (issue 32, item 3): examples/agui-ts, a TypeScript chat backend
// on published npm packages only, compiled with tsc (strict) and run with Node: its
// requester run stops at the interrupt, and its approver resume finishes the turn.
func TestAGUITypeScriptExample(t *testing.T) {
	npm := aguiNPM(t)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "page text")
	}))
	t.Cleanup(target.Close)
	model := newFakeModel(t, calls(call("c1", "web_fetch", fmt.Sprintf(`{"url":"%s/page"}`, target.URL))), answer("Fetched the page."))
	a := newAPIStack(t, model)
	dir, err := os.MkdirTemp(npm, "example-") // beside node_modules, so imports resolve
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, f := range []string{"index.ts", "tsconfig.json"} {
		b, err := os.ReadFile(filepath.Join(repoRoot, "examples", "agui-ts", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"type":"module"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(npm, "node_modules", ".bin", "tsc"), "-p", dir).CombinedOutput(); err != nil {
		t.Fatalf("tsc: %v\n%s", err, out)
	}
	cmd := exec.Command("node", filepath.Join(dir, "dist", "index.js"))
	cmd.Env = append(os.Environ(), "AIRLOCK_API_URL="+a.url, "AIRLOCK_API_KEY="+apiKeys["app-alice"], "APPROVER_KEY="+apiKeys["ops-bob"],
		fmt.Sprintf("THREAD=ts-%d", time.Now().UnixNano()%1000000), "MESSAGE=fetch the page")
	out, err := cmd.CombinedOutput()
	t.Logf("examples/agui-ts output:\n%s", out)
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	for _, want := range []string{`interrupt: "cf-`, "who may decide: an approver other than the turn's requester", `tool result:`, `text: "Fetched the page."`, "finished: success"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestAGUIHttpAgentStreaming: with a model that streams (text deltas, then a tool call whose
// arguments arrive in pieces), the official client's verifier accepts TEXT_MESSAGE_* and
// TOOL_CALL_* as Airlock writes them, the interrupt ends the run, and the approver's resume
// carries the TOOL_CALL_RESULT and the streamed answer to one RUN_FINISHED.
func TestAGUIHttpAgentStreaming(t *testing.T) {
	npm := aguiNPM(t)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "page text")
	}))
	t.Cleanup(target.Close)
	first := `{"id":"chatcmpl-s","object":"chat.completion","created":1700000000,"model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":"Let me look.","tool_calls":[` +
		call("c1", "web_fetch", fmt.Sprintf(`{"url":"%s/page"}`, target.URL)) + `]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`
	model := newStreamingModel(t, 4, time.Millisecond, answer("It says: page text."), first)
	a := newAPIStackAt(t, model.URL)
	thread := fmt.Sprintf("aguis-%d", time.Now().UnixNano()%1000000)
	env := func(caller string, more ...string) []string {
		return append([]string{"AIRLOCK_API_URL=" + a.url, "THREAD=" + thread, "AIRLOCK_API_KEY=" + apiKeys[caller]}, more...)
	}
	r := runAGUI(t, npm, env("app-alice", "MODE=start", "RUN=s-1", "MESSAGE=fetch the page")...)
	seen := strings.Join(r.Types, " ")
	if !r.OK || len(r.Interrupts) != 1 || !strings.Contains(seen, "TEXT_MESSAGE_CONTENT") || !strings.Contains(seen, "TOOL_CALL_ARGS TOOL_CALL_ARGS") || !strings.Contains(seen, "TOOL_CALL_END") {
		t.Fatalf("streamed start: %+v", r)
	}
	r = runAGUI(t, npm, env("ops-bob", "MODE=resume", "RUN=s-2", "INTERRUPT="+r.Interrupts[0].ID, "DECISION=approve")...)
	seen = strings.Join(r.Types, " ")
	if !r.OK || len(r.Finished) != 1 || !strings.Contains(seen, "TOOL_CALL_RESULT") || !strings.Contains(seen, "TEXT_MESSAGE_CONTENT") || !strings.Contains(string(r.Finished[0]), `"type":"success"`) {
		t.Fatalf("streamed resume: %+v", r)
	}
	if !strings.Contains(string(r.Messages), "It says: page text.") {
		t.Errorf("the client's messages lack the streamed answer: %s", r.Messages)
	}
}

// TestAGUIWebPageInChromium (issue 32, item 2): examples/agui-web, a chat page on the official
// AG-UI client loaded without a build step (an import map over the npm packages), served
// behind a backend that proxies /v1/ to the API and adds the requester's key (the browser holds
// none), shows a turn streaming in Chromium and its interrupt with who may decide; after an
// approver decides over the API, re-attaching shows the answer and the run's end.
func TestAGUIWebPageInChromium(t *testing.T) {
	npm := aguiNPM(t)
	tb := newTab(t)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "page text")
	}))
	t.Cleanup(target.Close)
	first := `{"id":"chatcmpl-w","object":"chat.completion","created":1700000000,"model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":"Let me look <b>now</b>.","tool_calls":[` +
		call("c1", "web_fetch", fmt.Sprintf(`{"url":"%s/page"}`, target.URL)) + `]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`
	model := newStreamingModel(t, 4, time.Millisecond, answer("It says: page text."), first)
	a := newAPIStackAt(t, model.URL)
	api, _ := url.Parse(a.url)
	proxy := httputil.NewSingleHostReverseProxy(api)
	proxy.FlushInterval = -1
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+apiKeys["app-alice"]) // the backend's key, never the browser's
		proxy.ServeHTTP(w, r)
	})
	files := http.StripPrefix("/npm/", http.FileServer(http.Dir(filepath.Join(npm, "node_modules"))))
	mux.HandleFunc("/npm/", func(w http.ResponseWriter, r *http.Request) {
		// rxjs's ES modules import their files without an extension (written for bundlers):
		// the static server answers such a path with its .js file, as the page's comment says.
		rel := filepath.FromSlash(strings.TrimPrefix(r.URL.Path, "/npm/"))
		if _, err := os.Stat(filepath.Join(npm, "node_modules", rel)); err != nil {
			if _, err := os.Stat(filepath.Join(npm, "node_modules", rel+".js")); err == nil {
				r.URL.Path += ".js"
			}
		}
		if strings.HasSuffix(r.URL.Path, ".mjs") || strings.HasSuffix(r.URL.Path, ".js") {
			w.Header().Set("Content-Type", "text/javascript")
		}
		files.ServeHTTP(w, r)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, filepath.Join(repoRoot, "examples", "agui-web", "index.html"))
	})
	site := httptest.NewServer(mux)
	t.Cleanup(site.Close)
	thread := fmt.Sprintf("web-%d", time.Now().UnixNano()%1000000)
	tb.do("open the chat page and send a message",
		chromedp.Navigate(site.URL+"/?thread="+thread+"&message="+url.QueryEscape("fetch the page")),
		chromedp.WaitVisible(css("#interrupt")))
	box, status, logText := tb.text("#interrupt"), tb.text("#status"), tb.text("#log")
	if !strings.Contains(box, "web.fetch@1 needs an approver's decision") || !strings.Contains(box, "an approver other than the turn's requester") || !strings.Contains(box, target.URL) {
		t.Fatalf("interrupt box: %q", box)
	}
	if status != "waiting for an approver" || !strings.Contains(logText, "Let me look <b>now</b>.") || !strings.Contains(logText, "tool call: web_fetch") {
		t.Fatalf("status %q, log %q", status, logText)
	}
	tb.screenshot("agui-web-interrupt.png")
	// An approver decides over the API; the page re-attaches and shows the end.
	code, b, _ := a.do("GET", "/v1/confirmations?conversation="+thread, "ops-bob", nil, nil)
	var list appapi.ConfirmationList
	if err := json.Unmarshal(b, &list); code != 200 || err != nil || len(list.Confirmations) != 1 {
		t.Fatalf("confirmations: %d %s", code, b)
	}
	cf := list.Confirmations[0]
	if code, b, _ = a.do("POST", "/v1/confirmations/"+cf.ID+"/decision", "ops-bob", map[string]any{"decision": "approve", "args_digest": cf.ArgsDigest}, nil); code != 200 {
		t.Fatalf("approve: %d %s", code, b)
	}
	evalAs[any](tb, `airlockRun(""), null`)
	deadline := time.Now().Add(60 * time.Second)
	for !strings.HasPrefix(tb.text("#status"), "finished") {
		if time.Now().After(deadline) {
			t.Fatalf("the page did not show the run's end: status %q, log %q", tb.text("#status"), tb.text("#log"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	status, logText = tb.text("#status"), tb.text("#log")
	if status != "finished: success" || !strings.Contains(logText, "It says: page text.") || !strings.Contains(logText, "tool result (untrusted)") {
		t.Fatalf("status %q, log %q", status, logText)
	}
}
