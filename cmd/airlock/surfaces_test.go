package main

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	jsv "github.com/santhosh-tekuri/jsonschema/v6"
	"go.temporal.io/sdk/client"
	"golang.org/x/crypto/bcrypt"
	"gopkg.in/yaml.v3"

	airlock "github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/appapi"
	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/notify"
	"github.com/airlock-dev/airlock/internal/notify/email"
	"github.com/airlock-dev/airlock/internal/notify/slack"
	"github.com/airlock-dev/airlock/internal/present"
	"github.com/airlock-dev/airlock/internal/provenance"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/token"
	"github.com/airlock-dev/airlock/internal/web"
	"github.com/airlock-dev/airlock/presentation"
	"github.com/airlock-dev/airlock/registry"
)

// The hostile strings of the fixture: a bidi override, a zero-width space, a terminal escape
// and HTML, in what the model wrote (arguments), what the user asked (the client's text) and
// what the registry layer declares (description).
const (
	hostileRecipient = "US13\u202eLIVE-ATTACKER"
	hostileSubject   = "rent\u200b\x1b[31m<script>alert(1)</script>"
	hostileRequest   = "Pay my rent of 100 \u202e<img src=x onerror=alert(2)>\x1b[2J"
	hostileDesc      = "Send money <b>now</b>\u200b"
)

// rawHostile are the bytes no surface may carry raw.
var rawHostile = []string{"\u202e", "\u200b", "\x1b"}

// rawHTML are the tags no HTML surface may carry unescaped.
var rawHTML = []string{"<script>", "<img", "<b>now"}

// surfaceFixture stores one confirmation of a quorum-2 call of approver group finance that
// only an approver other than the requester may decide (four eyes), approved once by erin, with a disclosure, a provenance report whose values came from the
// user, a tool result, both and nowhere, an attested requester and the user's request.
func surfaceFixture(t *testing.T, dir string) (string, store.Confirmation) {
	t.Helper()
	ctx := context.Background()
	u := "sqlite:" + filepath.Join(dir, "airlock.db")
	st, err := store.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	args := json.RawMessage(`{"recipient":` + jsonString(hostileRecipient) + `,"amount":100,"subject":` + jsonString(hostileSubject) + `,"date":"2026-12-31"}`)
	msgs := []inference.Message{
		{Role: inference.RoleUser, Content: "Pay my rent of 100 for 2026-12-31, subject rent"},
		{Role: inference.RoleTool, ToolCallID: "t1", Content: `{"bill":"pay ` + hostileRecipient + ` the amount 100"}`},
	}
	rep, err := provenance.Compute(args, provenance.FromContext(msgs, nil))
	if err != nil {
		t.Fatal(err)
	}
	prov, _ := json.Marshal(rep)
	disc, _ := json.Marshal(registry.Disclosure{Description: hostileDesc, SideEffect: registry.SideEffectExternalWrite,
		Network: registry.NetworkExternal, Destination: registry.Destination{Kind: "host", Name: "bank.example"},
		Leaving: []registry.LeavingField{{Field: "recipient", Value: json.RawMessage(jsonString(hostileRecipient))}, {Field: "amount", Value: json.RawMessage(`100`)}}})
	now := time.Now().UTC().Truncate(time.Second)
	row, err := st.CreateConfirmation(ctx, store.Confirmation{ID: "cf-fixture", TokenHash: bytes.Repeat([]byte{9}, 32),
		SealedToken: []byte("sealed"), WorkflowID: "turn/billing/3", RunID: "run-1", Seq: 2, CallID: "call-7",
		CapabilityID: "payments.send", Version: 2, ArgsDigest: "sha256:fixture", Arguments: args, Display: "send_money " + string(args),
		Disclosure: disc, Provenance: prov, CreatedAt: now, ExpiresAt: now.Add(time.Hour), ApproverGroups: []string{"finance"},
		Quorum: 2, DistinctApprover: true, UserRequest: hostileRequest})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddApproval(ctx, store.Approval{ConfirmationID: row.ID, Approver: "erin", Nonce: "n1", At: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecordRequester(ctx, store.TurnRequester{WorkflowID: row.WorkflowID, RunID: "run-1", Principal: "alice",
		Client: "billing-app", Signature: "sig-1", At: now}); err != nil {
		t.Fatal(err)
	}
	return u, row
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

// facts are what every surface must state the same about the fixture.
type facts struct {
	quorum, deciders, destination, userRequest, expiry string
	origins                                            []presentation.Origin
}

func factsOf(p presentation.Confirmation) facts {
	return facts{quorum: p.Quorum.Line(), deciders: p.Quorum.Deciders(), destination: p.Destination.Line, userRequest: p.UserRequest.Text, expiry: p.Expiry(), origins: p.Provenance}
}

// comparePresentation checks that a surface's presentation (decoded from its JSON) states the
// fixture's facts as the canonical one does.
func comparePresentation(t *testing.T, surface string, got presentation.Confirmation, want facts) {
	t.Helper()
	g := factsOf(got)
	if g.quorum != want.quorum || g.destination != want.destination || g.userRequest != want.userRequest || g.expiry != want.expiry {
		t.Errorf("%s: quorum %q destination %q user request %q expiry %q; want %q %q %q %q", surface, g.quorum, g.destination,
			g.userRequest, g.expiry, want.quorum, want.destination, want.userRequest, want.expiry)
	}
	if g.deciders != want.deciders || !got.Quorum.DistinctFromRequester {
		t.Errorf("%s: deciders %q (distinct_from_requester %v), want %q", surface, g.deciders, got.Quorum.DistinctFromRequester, want.deciders)
	}
	if len(g.origins) != len(want.origins) {
		t.Fatalf("%s: %d provenance lines, want %d", surface, len(g.origins), len(want.origins))
	}
	for i := range g.origins {
		if g.origins[i].Path != want.origins[i].Path || g.origins[i].Origin != want.origins[i].Origin || g.origins[i].Label.Text != want.origins[i].Label.Text {
			t.Errorf("%s: provenance %d = %+v, want %+v", surface, i, g.origins[i], want.origins[i])
		}
	}
}

// inText checks that a text surface (terminal, Slack, e-mail, the page's HTML after
// unescaping) states each fact in the same words.
func inText(t *testing.T, surface, text string, want facts, withExpiry bool) {
	t.Helper()
	needs := []string{want.quorum, want.deciders, want.destination, want.userRequest}
	if withExpiry {
		needs = append(needs, want.expiry)
	}
	for _, o := range want.origins {
		needs = append(needs, o.Label.Text)
	}
	for _, n := range needs {
		if !strings.Contains(text, n) {
			t.Errorf("%s does not state %q:\n%s", surface, n, text)
		}
	}
}

func noRawHostile(t *testing.T, surface, out string, isHTML bool) {
	t.Helper()
	bad := rawHostile
	if isHTML {
		bad = append(append([]string{}, bad...), rawHTML...)
	}
	for _, b := range bad {
		if strings.Contains(out, b) {
			t.Errorf("%s carries %q raw", surface, b)
		}
	}
}

// TestEverySurfaceSaysTheSame builds every approver surface from one stored confirmation (a
// quorum-2, four-eyes call with hostile arguments, description and user's request) and checks
// that each states the same facts — "2 needed, 1 so far (erin)", who may decide ("members of
// finance other than the requester"), the destination, the provenance
// labels (user, untrusted, both, none), the user's request and the expiry — and that no
// bidi override, zero-width character, terminal escape or (in HTML) tag reaches it raw:
// `airlock pending` and `--json`, the approver page's card, the application API's
// confirmation JSON, the client package's view (over the API), and the notices (webhook JSON,
// checked against docs/notice.v1.schema.json, Slack, e-mail text and HTML).
func TestEverySurfaceSaysTheSame(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	u, row := surfaceFixture(t, dir)
	st, err := store.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	canon, err := present.Present(ctx, st, row, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := factsOf(canon)
	if want.quorum != "2 needed, 1 so far (erin)" || want.deciders != "members of finance other than the requester" || want.destination != "host bank.example" || !strings.Contains(want.userRequest, "<U+202E>") {
		t.Fatalf("canonical facts: %+v", want)
	}
	seen := map[string]bool{}
	for _, o := range want.origins {
		seen[o.Origin] = true
	}
	for _, o := range []string{presentation.OriginUser, presentation.OriginUntrusted, presentation.OriginNone} {
		if !seen[o] {
			t.Errorf("the fixture's provenance has no %q value: %+v", o, want.origins)
		}
	}

	// airlock pending, text and JSON.
	env := []string{"AIRLOCK_DATABASE_URL=" + u}
	out, err := cli(t, env, "pending")
	if err != nil {
		t.Fatalf("pending: %v\n%s", err, out)
	}
	inText(t, "airlock pending", out, want, true)
	if !strings.Contains(out, "deciders:    members of finance other than the requester; 2 needed, 1 so far (erin)") {
		t.Errorf("airlock pending: deciders line:\n%s", out)
	}
	noRawHostile(t, "airlock pending", out, false)
	out, err = cli(t, env, "pending", "--json")
	if err != nil {
		t.Fatalf("pending --json: %v\n%s", err, out)
	}
	noRawHostile(t, "airlock pending --json", out, false)
	var list PendingList
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Confirmations) != 1 {
		t.Fatalf("pending --json: %v\n%s", err, out)
	}
	comparePresentation(t, "airlock pending --json", list.Confirmations[0], want)

	// The approver page, signed in as frank (finance).
	hash, _ := bcrypt.GenerateFromPassword([]byte("frank password"), bcrypt.MinCost)
	set, err := approvers.Parse([]byte(`{"approvers":[{"name":"frank","password_bcrypt":"` + string(hash) + `","groups":["finance"]},` +
		`{"name":"erin","password_bcrypt":"` + string(hash) + `","groups":["finance"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ws, err := web.New(web.Options{Store: st, Approvers: func() (web.Authenticator, error) { return set, nil },
		Decide:      func(context.Context, approval.Request) error { return nil },
		WorkflowURL: func(string) string { return "" }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(ws)
	defer hs.Close()
	page := signedInPage(t, hs.URL, "frank", "frank password", "/")
	noRawHostile(t, "the approver page", page, true)
	inText(t, "the approver page", html.UnescapeString(stripTags(page)), want, false)
	if !strings.Contains(page, `datetime="`+canon.ExpiresAt.Format("2006-01-02T15:04:05.000Z07:00")+`"`) {
		t.Errorf("the card's expiry is not %s", want.expiry)
	}

	// The application API and the client package over it.
	key, sum, err := appapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := appapi.NewKeys([]appapi.Caller{{Name: "ops-frank", Approver: "frank", KeySHA256: sum}})
	if err != nil {
		t.Fatal(err)
	}
	starter, _ := clients.NewCredential("api")
	surface, _ := approvers.NewCredential("surface:api")
	lazy, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"}) // never dialled
	if err != nil {
		t.Fatal(err)
	}
	akey, err := token.LoadOrCreateKey(filepath.Join(dir, "approver.key"))
	if err != nil {
		t.Fatal(err)
	}
	api, err := appapi.New(appapi.Options{Store: st, Temporal: lazy, Keys: keys, Starter: starter, ApproverKey: akey, Surface: surface,
		Approvers: func() (*approvers.Set, error) { return set, nil }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	as := httptest.NewServer(api)
	defer as.Close()
	req, _ := http.NewRequest(http.MethodGet, as.URL+"/v1/confirmations", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	noRawHostile(t, "the application API", string(body), false)
	var cl appapi.ConfirmationList
	if err := json.Unmarshal(body, &cl); err != nil || len(cl.Confirmations) != 1 {
		t.Fatalf("GET /v1/confirmations (%d): %v\n%s", resp.StatusCode, err, body)
	}
	comparePresentation(t, "the application API", cl.Confirmations[0].Presentation, want)
	validate(t, "the API's presentation", openAPIPresentation(t), mustJSON(t, cl.Confirmations[0].Presentation))
	ac, err := airlock.Dial(ctx, airlock.Options{APIURL: as.URL, APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	ps, err := ac.ListPending(ctx, airlock.ListFilter{})
	if err != nil || len(ps) != 1 {
		t.Fatalf("client ListPending: %v %d", err, len(ps))
	}
	comparePresentation(t, "the client package", airlock.Present(ps[0]), want)

	// The notices: the webhook's JSON (against the schema), Slack and e-mail.
	f := &notify.File{BaseURL: "https://airlock.example", Channels: []notify.ChannelConfig{{Name: "hook", Type: "webhook"}},
		Routes: []notify.Route{{Channels: []string{"hook"}}}}
	ds, err := notify.Deliveries(f, row)
	if err != nil || len(ds) != 1 {
		t.Fatalf("deliveries: %v %d", err, len(ds))
	}
	var n notify.Notice
	if err := json.Unmarshal(ds[0].Payload, &n); err != nil {
		t.Fatal(err)
	}
	n.Present(canon) // what the dispatcher does when it sends
	hook := mustJSON(t, n)
	noRawHostile(t, "the webhook notice", string(hook), false)
	validate(t, "the webhook notice", noticeSchema(t), hook)
	var back notify.Notice
	if err := json.Unmarshal(hook, &back); err != nil || back.Confirmation == nil || back.Schema != notify.SchemaV1 || back.Kind != notify.EventRequested {
		t.Fatalf("webhook notice: %v %+v", err, back)
	}
	comparePresentation(t, "the webhook notice", *back.Confirmation, want)
	if back.Requester == nil || back.Requester.Principal.Text != "alice" || !back.Requester.Attested {
		t.Errorf("webhook notice requester: %+v", back.Requester)
	}
	sl := mustJSON(t, slack.Render(n))
	noRawHostile(t, "the Slack notice", string(sl), false)
	var slText strings.Builder
	var msg slack.Message
	_ = json.Unmarshal(sl, &msg)
	for _, b := range msg.Blocks {
		if b.Text != nil {
			slText.WriteString(b.Text.Text + "\n")
		}
	}
	inText(t, "the Slack notice", slText.String(), want, true)
	mailText, mailHTML := email.Text(n), email.HTML(n)
	noRawHostile(t, "the e-mail (text)", mailText, false)
	noRawHostile(t, "the e-mail (HTML)", mailHTML, true)
	inText(t, "the e-mail (text)", mailText, want, true)
	inText(t, "the e-mail (HTML)", html.UnescapeString(stripTags(mailHTML)), want, true)
}

var tagRe = regexp.MustCompile(`<[^>]*>`)

// stripTags leaves the text of an HTML page (tags removed, whitespace runs as one space).
func stripTags(s string) string {
	return strings.Join(strings.Fields(tagRe.ReplaceAllString(s, " ")), " ")
}

// signedInPage signs name in on the page at base and returns path's HTML.
func signedInPage(t *testing.T, base, name, password, path string) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	req, _ := http.NewRequest(http.MethodPost, base+"/login", strings.NewReader(url.Values{"name": {name}, "password": {password}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = c.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "cf-fixture") {
		t.Fatalf("GET %s as %s: %s\n%s", path, name, resp.Status, b)
	}
	return string(b)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// noticeSchema is docs/notice.v1.schema.json, compiled.
func noticeSchema(t *testing.T) *jsv.Schema {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "notice.v1.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsv.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsv.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("notice.v1.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("notice.v1.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// openAPIPresentation is the application API's Presentation schema (openapi.yaml), compiled.
func openAPIPresentation(t *testing.T) *jsv.Schema {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "internal", "appapi", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var y any
	if err := yaml.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(y)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsv.UnmarshalJSON(bytes.NewReader(jb))
	if err != nil {
		t.Fatal(err)
	}
	c := jsv.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("openapi.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("openapi.json#/components/schemas/Presentation")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validate(t *testing.T, what string, s *jsv.Schema, b []byte) {
	t.Helper()
	v, err := jsv.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(v); err != nil {
		t.Errorf("%s does not validate: %v\n%s", what, err, b)
	}
}

// The notice schema's definitions of the presentation are the application API's (one shape,
// written twice: once for OpenAPI, once for webhook receivers), and every notice kind the
// outbox makes validates against it.
func TestNoticeSchemaMatchesTheAPIAndEveryKind(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "notice.v1.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Defs map[string]any `json:"$defs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	ab, _ := os.ReadFile(filepath.Join("..", "..", "internal", "appapi", "openapi.yaml"))
	var api struct {
		Components struct {
			Schemas map[string]any `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(ab, &api); err != nil {
		t.Fatal(err)
	}
	for name, def := range doc.Defs {
		a, _ := json.Marshal(api.Components.Schemas[name])
		a = bytes.ReplaceAll(a, []byte("#/components/schemas/"), []byte("#/$defs/"))
		d, _ := json.Marshal(def)
		var x, y any
		_ = json.Unmarshal(a, &x)
		_ = json.Unmarshal(d, &y)
		if !jsonEqual(x, y) {
			t.Errorf("$defs/%s differs from openapi.yaml's:\n%s\n%s", name, d, a)
		}
	}
	s := noticeSchema(t)
	ctx := context.Background()
	u, row := surfaceFixture(t, t.TempDir())
	st, err := store.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	decided := time.Now().UTC()
	if err := st.DecideConfirmation(ctx, row.ID, store.DecisionDenied, "frank", "not our account", decided); err != nil {
		t.Fatal(err)
	}
	row, _ = st.GetConfirmation(ctx, row.ID)
	n := notify.Build(row, notify.KindDecided, "hook", "")
	p, err := present.Present(ctx, st, row, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	n.Present(p)
	validate(t, "a decided notice", s, mustJSON(t, n))
	if n.Decision == nil || n.Decision.Decision != "denied" || n.Outcome != "denied" || !strings.HasPrefix(n.Title(), "Denied") {
		t.Errorf("decided notice: %+v %q", n.Decision, n.Title())
	}
	m := notify.BuildMCP(notify.MCPToolChange{Server: "tickets", Tool: "get\u202eticket", Capability: "mcp.tickets.get@1", Reason: "mcp_definition_changed",
		Detail: "description changed", Pinned: "sha256:aa", Live: "sha256:bb"}, "mcp/tickets/get/aa/bb", "hook", time.Now())
	mb := mustJSON(t, m)
	validate(t, "an MCP change notice", s, mb)
	noRawHostile(t, "an MCP change notice", string(mb), false)
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
