package integration

// Browser tests of the approver page (issue 8 items 1, 2, 3 and 6): a real headless Chromium
// (Debian's chromium, driven by chromedp) signs in to a real `airlock web` process serving a
// real store on PostgreSQL, deciding turns run by a real worker on the Temporal dev server,
// with a scripted model (a real OpenAI-compatible HTTP server) proposing the calls.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/passkey"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

// webRegistry offers the tools of ../shared/cases/approver-display.jsonl, each an external
// effect a human must confirm; send_money falls under the four-eyes rule.
var webRegistry = `{"schema/v":"capability-registry.v1","revision":"web-test.1","entries":[` + strings.Join([]string{
	apEntry("test.web-fetch", "web_fetch", "none", "external", "Fetch a web page.", `,"destination":{"kind":"host","name":"*","fields":["url"]}`),
	apEntry("test.send-money", "send_money", "external-write", "external", "Send money.", `,"destination":{"kind":"system","name":"test bank","fields":["recipient","amount","subject","date"]}`),
	apEntry("test.send-email", "send_email", "external-write", "external", "Send an email.", `,"destination":{"kind":"system","name":"test mail","fields":["recipients","subject","body"]}`),
}, ",") + `]}`

type sendMoneyArgs struct {
	Recipient string  `json:"recipient" validate:"required"`
	Amount    float64 `json:"amount"`
	Subject   string  `json:"subject"`
	Date      string  `json:"date"`
}

type sendEmailArgs struct {
	Recipients []string `json:"recipients" validate:"required"`
	Subject    string   `json:"subject"`
	Body       string   `json:"body"`
}

// webPassword is every test approver's page password.
const webPassword = "correct horse battery staple"

// webEnv is one browser test's world: a durEnv on webRegistry with a scripted model, an
// approvers file with passwords for alice and bob, a worker authenticating against it, an
// `airlock web` process, and a headless Chromium.
type webEnv struct {
	*durEnv
	approvers string
	url       string
	model     *modelServer
}

// browserPath finds Chromium, or skips the test when none is installed and
// AIRLOCK_REQUIRE_BROWSER is unset (.ci/run sets it: there a missing browser fails).
func browserPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("AIRLOCK_REQUIRE_BROWSER") != "" {
		t.Fatal("AIRLOCK_REQUIRE_BROWSER is set but no chromium is installed: apt-get install -y chromium")
	}
	t.Skip("browser tests skipped: chromium is not installed (apt-get install -y chromium; set AIRLOCK_REQUIRE_BROWSER=1 to make this a failure)")
	return ""
}

// newWebEnv starts everything but the browser; routes script the model per user message
// (newRoutedModel).
func newWebEnv(t *testing.T, routes map[string][]string) *webEnv {
	t.Helper()
	browserPath(t)
	e := &webEnv{durEnv: newDurEnv(t)}
	src := registry.Source{Name: "web-test", Data: []byte(webRegistry)}
	// The policy sidecar: every capability confirmed, send_money under the four-eyes rule.
	policy := registry.StructuralPolicy("web-test policy", "web-test.1", func(e registry.Entry) bool { return e.ID == "test.send-money" }, src)
	reg, err := registry.Load([]registry.Source{src, policy}, []registry.Implementation{
		effect[urlArgs](e.durEnv, "test.web-fetch", "web_fetch", `{"body":"<html>page</html>"}`),
		effect[sendMoneyArgs](e.durEnv, "test.send-money", "send_money", `{"sent":true}`),
		effect[sendEmailArgs](e.durEnv, "test.send-email", "send_email", `{"sent":true}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.reg = reg
	e.approvers = filepath.Join(e.home, "approvers.json")
	for _, n := range []string{"alice", "bob"} {
		h, err := approvers.HashPassword(webPassword)
		if err != nil {
			t.Fatal(err)
		}
		if err := approvers.Add(e.approvers, approvers.Approver{Name: n, PasswordBcrypt: h}); err != nil {
			t.Fatal(err)
		}
	}
	e.model = newRoutedModel(t, routes)
	e.startWebWorker()
	e.url = e.startWeb()
	return e
}

// startWebWorker runs an in-process worker that authenticates decisions against the env's
// approvers file (re-read when `airlock web` registers its surface key in it).
func (e *webEnv) startWebWorker() {
	st, err := store.Open(context.Background(), e.dbURL)
	if err != nil {
		e.t.Fatal(err)
	}
	src := approvers.NewSource(e.approvers)
	acts := &activities.Activities{Registry: e.reg, Store: st, Live: e.openAI(e.model.URL), ApproverKey: e.key, Approvers: src.Current, Clients: testClients(),
		// The page listens on a random loopback port: local development's explicit wildcard.
		Passkeys: passkey.Config{RPID: "localhost", Origins: []string{"http://localhost:*"}}}
	w := workers.New(e.c, acts, e.queue)
	if err := w.Start(); err != nil {
		st.Close()
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { w.Stop(); st.Close() })
}

// startWeb runs `airlock web` on a free loopback port against the env's store, approver key,
// approvers file and the test Temporal server, and returns its URL once it listens.
func (e *webEnv) startWeb() string {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, airlockBin, "web", "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "AIRLOCK_HOME="+e.home, "AIRLOCK_DATABASE_URL="+e.dbURL, "AIRLOCK_APPROVERS="+e.approvers,
		"TEMPORAL_ADDRESS="+devServer.Address, "TEMPORAL_NAMESPACE="+devServer.Namespace, "AIRLOCK_TEMPORAL_UI="+devServer.UIAddress,
		"AIRLOCK_PASSKEY_ORIGINS=http://localhost:*")
	cmd.Stderr = &syncBuffer{}
	out, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		cancel()
		cmd.Wait()
		if e.t.Failed() {
			e.t.Logf("airlock web stderr:\n%s", cmd.Stderr)
		}
	})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "approver page: http://"); ok {
				urls <- "http://" + strings.Fields(rest)[0]
			}
		}
	}()
	select {
	case u := <-urls:
		return strings.TrimRight(u, "/")
	case <-time.After(60 * time.Second):
		e.t.Fatalf("airlock web did not print its URL; stderr:\n%s", cmd.Stderr)
	}
	return ""
}

// startTurn starts turn 1 of conversation conv (made unique to the test) with the options
// every client starts turns with (workflows.StartOptions: conversation and principal search
// attributes), and returns its run.
func (e *webEnv) startTurn(conv string, req workflows.TurnRequest) client.WorkflowRun {
	e.t.Helper()
	req.Conversation = conv + "-" + e.queue
	run, err := e.c.ExecuteWorkflow(context.Background(), workflows.StartOptions(workflows.TurnWorkflowID(req.Conversation, 1), e.queue, req),
		workers.TurnWorkflowName, req)
	if err != nil {
		e.t.Fatal(err)
	}
	return run
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// tab is a headless Chromium tab. dialogs records the JavaScript dialogs (alert, confirm,
// prompt) that opened: an XSS payload that ran would open one.
type tab struct {
	t       *testing.T
	ctx     context.Context
	mu      sync.Mutex
	dialogs []string
}

func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// newTab starts Chromium headless with its own profile (no cookies shared with other tabs)
// and the flags that keep it off the network.
func newTab(t *testing.T) *tab {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(browserPath(t)), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 1100),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 4*time.Minute)
	tb := &tab{t: t, ctx: ctx}
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.dialogs = append(tb.dialogs, ev.Message)
			tb.mu.Unlock()
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	return tb
}

// do runs actions, failing the test with the page's location and text.
func (b *tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		loc, _ := chromedp.Run(b.ctx, chromedp.Location())
		body, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		b.t.Fatalf("%s: %v\nat %s:\n%s", what, err, loc, body)
	}
}

// evalAs evaluates js on the page and decodes its value as T.
func evalAs[T any](b *tab, js string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

func (b *tab) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(css(sel)))
	if err != nil {
		b.t.Fatalf("read %s: %v", sel, err)
	}
	return s
}

func (b *tab) location() string {
	loc, _ := chromedp.Run(b.ctx, chromedp.Location())
	return loc
}

func (b *tab) noDialogs() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.dialogs) > 0 {
		b.t.Fatalf("a JavaScript dialog opened (injected script ran): %q", b.dialogs)
	}
}

// signIn signs in on the page at base as name.
func (b *tab) signIn(base, name string) {
	b.t.Helper()
	b.do("sign in as "+name,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(css(`input[name=name]`)),
		chromedp.SendKeys(css(`input[name=name]`), name),
		chromedp.SendKeys(css(`input[name=password]`), webPassword),
		chromedp.Click(css(`form.login button`)),
		chromedp.WaitVisible(css(`#me`)))
	if got := b.text(`#me`); got != name {
		b.t.Fatalf("signed in as %q, want %q", got, name)
	}
}

// waitCard reloads the inbox until confirmation id's card is on it.
func (b *tab) waitCard(base, id string) {
	b.t.Helper()
	eventually(b.t, 60*time.Second, "card "+id+" on the inbox", func() bool {
		b.do("load the inbox", chromedp.Navigate(base+"/"), chromedp.WaitReady(css(`#count`)))
		return evalAs[int](b, fmt.Sprintf(`document.querySelectorAll('[data-confirmation=%q]').length`, id)) > 0
	})
}

// waitTurnText reloads the turn's page until sel's text contains want, and returns it.
func (b *tab) waitTurnText(base, workflowID, sel, want string) string {
	b.t.Helper()
	var got string
	eventually(b.t, 60*time.Second, fmt.Sprintf("%q in %s of turn %s", want, sel, workflowID), func() bool {
		b.do("load the turn", chromedp.Navigate(base+"/turn?id="+url.QueryEscape(workflowID)), chromedp.WaitReady(css(`#status`)))
		got = evalAs[string](b, fmt.Sprintf(`(document.querySelector(%q)||{innerText:""}).innerText`, sel))
		return strings.Contains(got, want)
	})
	return got
}

func card(id string) string { return fmt.Sprintf(`[data-confirmation=%q]`, id) }

// screenshot writes a full-page PNG to docs/screenshots/name.
func (b *tab) screenshot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	dir := filepath.Join(repoRoot, "docs", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("wrote docs/screenshots/%s (%d bytes)", name, len(png))
}

const moneyArgs = `{"recipient":"GB29NWBK60161331926819","amount":120.5,"subject":"rent","date":"2026-12-01"}`

// TestWebApproveRunsTheCall: bob signs in, sees the pending send_money with its literal
// arguments, what leaves the machine and a live countdown, approves, is told at once it was
// accepted, and sees the turn complete with the call executed once, approved by bob (the
// signed-in approver, attested by the page's surface key).
func TestWebApproveRunsTheCall(t *testing.T) {
	t.Parallel()
	e := newWebEnv(t, map[string][]string{"pay rent": {calls(call("c1", "send_money", moneyArgs))}})
	run := e.startTurn("web-approve", workflows.TurnRequest{Message: "pay rent", Principal: "alice"})
	p := waitPending(t, e.c, run.GetID(), map[string]bool{})
	b := newTab(t)
	b.signIn(e.url, "bob")
	b.waitCard(e.url, p.ConfirmationID)
	c := card(p.ConfirmationID)
	if got := b.text(c + ` .tool`); !strings.Contains(got, "send_money") {
		t.Fatalf("tool = %q", got)
	}
	if got := b.text(c + ` .cap`); got != "test.send-money@1" {
		t.Fatalf("capability = %q", got)
	}
	if got := b.text(c + ` table.args`); !strings.Contains(got, "GB29NWBK60161331926819") || !strings.Contains(got, "120.5") {
		t.Fatalf("arguments = %q", got)
	}
	if got := b.text(c + ` .leaves`); !strings.Contains(got, "GB29NWBK60161331926819") || !strings.Contains(got, "120.5") ||
		!strings.Contains(got, "test bank") || !strings.Contains(got, "external-write") || !strings.Contains(got, "Send money.") {
		t.Fatalf("what leaves the machine = %q", got)
	}
	if got := b.text(c + ` dl.meta`); !strings.Contains(got, "alice") {
		t.Fatalf("requesting principal not shown: %q", got)
	}
	var countdown string
	b.do("countdown ticks", chromedp.WaitVisible(css(c+` time.countdown`)))
	eventually(t, 5*time.Second, "a live countdown", func() bool {
		countdown = b.text(c + ` time.countdown`)
		return strings.HasSuffix(countdown, "s left")
	})
	temporalLink := evalAs[string](b, fmt.Sprintf(`document.querySelector(%q).href`, c+` dl.meta a[target=_blank]`))
	if !strings.HasPrefix(temporalLink, devServer.UIAddress) || !strings.Contains(temporalLink, "web-approve") {
		t.Fatalf("Temporal UI link = %q", temporalLink)
	}
	b.do("approve", chromedp.Click(css(c+` button.approve`)), chromedp.WaitVisible(css(`#answer`)))
	if got := b.text(`#answer`); !strings.Contains(got, "Approved "+p.ConfirmationID+" as bob") {
		t.Fatalf("answer = %q", got)
	}
	b.waitTurnText(e.url, run.GetID(), `#outcomes`, "executed")
	res := result(t, run)
	if len(res.Outcomes) != 1 || res.Outcomes[0].Outcome != activities.OutcomeExecuted || res.Outcomes[0].Approver != "bob" {
		t.Fatalf("outcomes = %s (%+v)", outcomeList(res), res.Outcomes)
	}
	if got := e.rec.of("send_money"); len(got) != 1 || got[0] != canon(t, moneyArgs) {
		t.Fatalf("send_money ran %v", got)
	}
	b.noDialogs()
}

// TestWebFourEyesAndDeny: alice, who asked, reads on the card that an approver other than the
// requester must decide, and is refused approver_is_requester (shown at once, the call does
// not run); then she denies with a reason, and the reason reaches the turn's
// result and the turn's page.
func TestWebFourEyesAndDeny(t *testing.T) {
	t.Parallel()
	e := newWebEnv(t, map[string][]string{"pay rent": {calls(call("c1", "send_money", moneyArgs))}})
	run := e.startTurn("web-deny", workflows.TurnRequest{Message: "pay rent", Principal: "alice"})
	p := waitPending(t, e.c, run.GetID(), map[string]bool{})
	b := newTab(t)
	b.signIn(e.url, "alice")
	b.waitCard(e.url, p.ConfirmationID)
	c := card(p.ConfirmationID)
	if got := b.text(c + ` dd.deciders`); !strings.Contains(got, "any approver other than the requester") || !p.DistinctApprover {
		t.Fatalf("before alice tries, the card's deciders = %q (pending query DistinctApprover %v): it must say four eyes", got, p.DistinctApprover)
	}
	b.do("approve own request", chromedp.Click(css(c+` button.approve`)), chromedp.WaitVisible(css(`#answer`)))
	if got := b.text(`#answer`); !strings.Contains(got, "approver_is_requester") {
		t.Fatalf("answer to a four-eyes violation = %q", got)
	}
	if n := len(e.rec.of("send_money")); n != 0 {
		t.Fatalf("send_money ran %d times after a refused approval", n)
	}
	const reason = "not our landlord's account"
	b.waitCard(e.url, p.ConfirmationID) // a refused decision consumed the token; the proposal got a fresh one
	b.do("deny with a reason",
		chromedp.SendKeys(css(c+` form.deny input[name=reason]`), reason),
		chromedp.Click(css(c+` button.deny`)), chromedp.WaitVisible(css(`#answer`)))
	if got := b.text(`#answer`); !strings.Contains(got, "Denied "+p.ConfirmationID+" as alice") {
		t.Fatalf("answer = %q", got)
	}
	page := b.waitTurnText(e.url, run.GetID(), `#outcomes`, "denied")
	if !strings.Contains(page, reason) {
		t.Fatalf("the turn's page does not show the reason: %q", page)
	}
	res := result(t, run)
	if len(res.Outcomes) != 1 || res.Outcomes[0].Outcome != activities.OutcomeDenied ||
		!strings.Contains(res.Outcomes[0].Detail+res.Outcomes[0].Reason, reason) {
		t.Fatalf("outcomes = %+v", res.Outcomes)
	}
	if n := len(e.rec.of("send_money")); n != 0 {
		t.Fatalf("send_money ran %d times", n)
	}
	b.do("history", chromedp.Navigate(e.url+"/history"), chromedp.WaitVisible(css(`#history`)))
	if got := b.text(`#history`); !strings.Contains(got, p.ConfirmationID) || !strings.Contains(got, reason) {
		t.Fatalf("history = %q", got)
	}
}

// TestWebEditRunsTheApproversArguments: bob edits the proposed send_money in the page's JSON
// form (the amount and the recipient); the original proposal is denied edited_by_approver,
// the edited arguments run once as a new, approver-originated proposal, and the turn's page
// shows both outcomes.
func TestWebEditRunsTheApproversArguments(t *testing.T) {
	t.Parallel()
	e := newWebEnv(t, map[string][]string{"pay rent": {calls(call("c1", "send_money", moneyArgs))}})
	run := e.startTurn("web-edit", workflows.TurnRequest{Message: "pay rent", Principal: "alice"})
	p := waitPending(t, e.c, run.GetID(), map[string]bool{})
	b := newTab(t)
	b.signIn(e.url, "bob")
	b.waitCard(e.url, p.ConfirmationID)
	c := card(p.ConfirmationID)
	prefilled := evalAs[string](b, fmt.Sprintf(`document.querySelector(%q).value`, c+` form.edit textarea`))
	var shown map[string]any
	if err := json.Unmarshal([]byte(prefilled), &shown); err != nil || shown["recipient"] != "GB29NWBK60161331926819" {
		t.Fatalf("the edit form is not prefilled with the literal arguments: %q (%v)", prefilled, err)
	}
	const edited = `{"recipient":"GB29NWBK60161331926819","amount":12.05,"subject":"rent (corrected)","date":"2026-12-01"}`
	b.do("edit",
		chromedp.Click(css(c+` details.edit summary`)),
		chromedp.SetValue(css(c+` form.edit textarea`), edited),
		chromedp.Click(css(c+` button.edit`)), chromedp.WaitVisible(css(`#answer`)))
	if got := b.text(`#answer`); !strings.Contains(got, "Edited "+p.ConfirmationID+" as bob") {
		t.Fatalf("answer = %q", got)
	}
	page := b.waitTurnText(e.url, run.GetID(), `#outcomes`, "executed")
	if !strings.Contains(page, workflows.ReasonEditedByApprover) || !strings.Contains(page, "approver") || !strings.Contains(page, "12.05") {
		t.Fatalf("the turn's page does not show the edit's outcomes: %q", page)
	}
	res := result(t, run)
	if len(res.Outcomes) != 2 || res.Outcomes[0].Outcome != activities.OutcomeDenied || res.Outcomes[0].Reason != workflows.ReasonEditedByApprover ||
		res.Outcomes[1].Outcome != activities.OutcomeExecuted || res.Outcomes[1].Origin != workflows.OriginApprover || res.Outcomes[1].Approver != "bob" {
		t.Fatalf("outcomes = %s (%+v)", outcomeList(res), res.Outcomes)
	}
	if got := e.rec.of("send_money"); len(got) != 1 || got[0] != canon(t, edited) {
		t.Fatalf("send_money ran %v, want once with the edited arguments", got)
	}
	b.noDialogs()
}

// TestWebExpiredCannotBeApproved: a confirmation with a short lifetime turns "expired" on the
// open page by itself (countdown, buttons disabled); a form submitted anyway (the disabled
// button bypassed with script) is refused by the server, and the call never runs.
func TestWebExpiredCannotBeApproved(t *testing.T) {
	t.Parallel()
	e := newWebEnv(t, map[string][]string{"fetch it": {calls(call("c1", "web_fetch", `{"url":"https://example.com/report"}`))}})
	// Long enough to sign in and open the inbox on a loaded machine (the card leaves the inbox
	// once the turn records the expiry), short enough to watch it run out.
	run := e.startTurn("web-expire", workflows.TurnRequest{Message: "fetch it", ConfirmationTTL: 20 * time.Second})
	p := waitPending(t, e.c, run.GetID(), map[string]bool{})
	b := newTab(t)
	b.signIn(e.url, "bob")
	b.waitCard(e.url, p.ConfirmationID)
	c := card(p.ConfirmationID)
	b.do("the page marks it expired", chromedp.WaitVisible(css(c+`.expired`)))
	disabled := evalAs[bool](b, fmt.Sprintf(`document.querySelector(%q).disabled`, c+` button.approve`))
	if got := b.text(c + ` time.countdown`); got != "expired" || !disabled {
		t.Fatalf("countdown %q, approve disabled %v", got, disabled)
	}
	b.do("submit the approval anyway",
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).submit()`, c+` form.approve`)),
		chromedp.WaitVisible(css(`#answer`)))
	if got := b.text(`#answer`); !strings.Contains(got, "expired") {
		t.Fatalf("answer = %q", got)
	}
	res := result(t, run)
	if len(res.Outcomes) != 1 || res.Outcomes[0].Outcome != activities.OutcomeExpired {
		t.Fatalf("outcomes = %s", outcomeList(res))
	}
	if n := len(e.rec.of("web_fetch")); n != 0 {
		t.Fatalf("web_fetch ran %d times", n)
	}
}

// TestWebRefusesForgedRequests: an approval from a stale page (its argument digest is not the
// proposal's) is not sent and says so; a signed-in browser whose form lost its CSRF token is refused
// 403; a page on another origin posting an approval to the approver page (cross-site form,
// the session cookie is SameSite=Strict) is refused; a browser without a session is sent to
// the sign-in page and its POST is refused 401. The proposal stays pending throughout.
func TestWebRefusesForgedRequests(t *testing.T) {
	t.Parallel()
	e := newWebEnv(t, map[string][]string{"fetch it": {calls(call("c1", "web_fetch", `{"url":"https://example.com/report"}`))}})
	run := e.startTurn("web-forged", workflows.TurnRequest{Message: "fetch it"})
	p := waitPending(t, e.c, run.GetID(), map[string]bool{})
	c := card(p.ConfirmationID)
	b := newTab(t)
	b.signIn(e.url, "bob")
	b.waitCard(e.url, p.ConfirmationID)

	// A page that displayed other arguments (its digest differs from the bound proposal's):
	// nothing is sent, the answer says the page is stale, the token is untouched.
	b.do("approve from a stale page",
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).value = "0000"`, c+` form.approve input[name=args_digest]`)),
		chromedp.Click(css(c+` button.approve`)), chromedp.WaitVisible(css(`#answer`)))
	if got := b.text(`#answer`); !strings.Contains(got, "stale page") {
		t.Fatalf("answer to a stale page = %q", got)
	}
	if row := e.row(p.ConfirmationID); row.Decision != "" || row.ConsumedAt != nil {
		t.Fatalf("a stale decision touched %s: %+v", p.ConfirmationID, row)
	}
	b.waitCard(e.url, p.ConfirmationID)

	b.do("POST without CSRF token",
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).remove()`, c+` form.approve input[name=csrf]`)),
		chromedp.Click(css(c+` button.approve`)))
	eventually(t, 10*time.Second, "the answer to a POST without a CSRF token", func() bool {
		body, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		return strings.Contains(body, "CSRF")
	})

	// Another site's page auto-posts a forged approval to the approver page.
	form := fmt.Sprintf(`<form id="f" method="post" action="%s/decide"><input name="confirmation_id" value="%s"><input name="decision" value="approve"><input name="args_digest" value="%s"><input name="csrf" value="guess"></form><button id="go" onclick="document.getElementById('f').submit()">go</button>`,
		e.url, p.ConfirmationID, p.ArgsDigest)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, "<!doctype html>"+form)
	}))
	defer evil.Close()
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1) // another origin
	b.do("open the other site's page", chromedp.Navigate(evilURL), chromedp.WaitVisible(css(`#go`)))
	b.do("post its form", chromedp.Click(css(`#go`)))
	eventually(t, 10*time.Second, "the cross-site POST answered", func() bool {
		return strings.HasPrefix(b.location(), e.url)
	})
	if got := b.text(`body`); !strings.Contains(got, "refused") {
		t.Fatalf("cross-site POST answered %q", got)
	}

	// Without a session: pages redirect to /login, a POST is refused.
	if _, err := chromedp.Call(b.ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	b.do("unauthenticated GET", chromedp.Navigate(e.url+"/history"), chromedp.WaitVisible(css(`form.login`)))
	loc := b.location()
	if !strings.HasSuffix(loc, "/login") {
		t.Fatalf("unauthenticated GET /history landed on %s", loc)
	}
	status, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](fmt.Sprintf(`fetch('/decide', {method: 'POST', body: new URLSearchParams({confirmation_id: %q, decision: 'approve', csrf: 'x'})}).then(r => r.status)`, p.ConfirmationID), chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusUnauthorized {
		t.Fatalf("unauthenticated POST /decide = %d, want 401", status)
	}
	if row := e.row(p.ConfirmationID); row.Decision != "" {
		t.Fatalf("a refused request decided %s: %+v", p.ConfirmationID, row)
	}
	if got := pending(t, e.c, run.GetID()); len(got) != 1 {
		t.Fatalf("pending = %+v, want the proposal still waiting", got)
	}
	b.noDialogs()
}

// displayCase is one line of ../shared/cases/approver-display.jsonl.
type displayCase struct {
	ID    string `json:"id"`
	Input struct {
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"input"`
	Expect struct {
		Flags            []string `json:"flags"`
		Shows            []string `json:"shows"`
		Inert            bool     `json:"inert"`
		FullViewContains string   `json:"full_view_contains"`
	} `json:"expect"`
}

func readDisplayCases(t *testing.T) []displayCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "..", "shared", "cases", "approver-display.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []displayCase
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var c displayCase
		if err := json.Unmarshal(l, &c); err != nil {
			t.Fatalf("case %s: %v", l, err)
		}
		out = append(out, c)
	}
	return out
}

// TestWebHostileArgumentsStayInertAndMarked: every case of approver-display.jsonl is proposed
// by the model in one turn each; on the inbox no script runs (no dialog, no element injected:
// the only script is the page's own, no <img src=x>), every hidden character shows as
// <U+XXXX>, each expected flag has its badge on the card, a homograph host shows its
// punycode, and a long value is cut with a "show all" that holds the whole value. The inbox,
// with these cards, is the screenshot docs/screenshots/approver-inbox.png.
func TestWebHostileArgumentsStayInertAndMarked(t *testing.T) {
	t.Parallel()
	cases := readDisplayCases(t)
	routes := map[string][]string{}
	for _, c := range cases {
		routes["display case "+c.ID+"."] = []string{calls(call("call-"+c.ID, c.Input.Tool, string(c.Input.Arguments)))}
	}
	e := newWebEnv(t, routes)
	ids := map[string]string{}
	for _, c := range cases {
		run := e.startTurn("web-display-"+c.ID, workflows.TurnRequest{Message: "display case " + c.ID + ".", Principal: "model-user"})
		ids[c.ID] = waitPending(t, e.c, run.GetID(), map[string]bool{}).ConfirmationID
	}
	b := newTab(t)
	b.signIn(e.url, "bob")
	for _, c := range cases {
		b.waitCard(e.url, ids[c.ID])
	}
	scripts := evalAs[int](b, `document.querySelectorAll('script').length`)
	imgs := evalAs[int](b, `document.querySelectorAll('img').length`)
	injected := evalAs[int](b, `document.querySelectorAll('main script, main img, main iframe, [onerror], [onload]').length`)
	if scripts != 1 || imgs != 0 || injected != 0 {
		t.Fatalf("injected elements: %d scripts (want only app.js), %d images, %d other", scripts, imgs, injected)
	}
	for _, c := range cases {
		sel := card(ids[c.ID])
		text := evalAs[string](b, fmt.Sprintf(`document.querySelector(%q).textContent`, sel))
		for _, want := range c.Expect.Shows {
			if !strings.Contains(text, want) {
				t.Errorf("%s: card does not show %q:\n%s", c.ID, want, text)
			}
		}
		if strings.ContainsAny(text, "\u202e\u202c\u2066\u2069\u200b\u0007\u001b\r") {
			t.Errorf("%s: card holds a raw hidden character: %q", c.ID, text)
		}
		for _, f := range c.Expect.Flags {
			n := evalAs[int](b, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel+fmt.Sprintf(` .flag[data-flag=%q]`, f)))
			if n == 0 {
				t.Errorf("%s: no %s badge on the card", c.ID, f)
			}
		}
		if c.Input.Tool == "web_fetch" && strings.Contains(string(c.Input.Arguments), `\u0430pple`) {
			// The declared destination names the host contacted, flagged as written otherwise.
			host := evalAs[string](b, fmt.Sprintf(`document.querySelector(%q).innerText`, sel+` .destination dd.host`))
			if !strings.Contains(host, "xn--pple-43d.example") || !strings.Contains(host, "host_differs") || !strings.Contains(host, "written as") {
				t.Errorf("%s: destination host = %q", c.ID, host)
			}
		}
		if c.Expect.Inert && !strings.Contains(text, `<script>alert(1)</script>`) {
			t.Errorf("%s: the markup is not shown as text: %q", c.ID, text)
		}
		if c.Expect.FullViewContains != "" {
			shown := evalAs[string](b, fmt.Sprintf(`document.querySelector(%q).innerText`, sel+` table.args`))
			b.do("show all", chromedp.Click(css(sel+` table.args details.all summary`)))
			full := evalAs[string](b, fmt.Sprintf(`document.querySelector(%q).innerText`, sel+` table.args details.all pre`))
			if strings.Contains(shown, c.Expect.FullViewContains) || !strings.Contains(full, c.Expect.FullViewContains) {
				t.Errorf("%s: truncated view has %q: %v; show all has it: %v", c.ID, c.Expect.FullViewContains,
					strings.Contains(shown, c.Expect.FullViewContains), strings.Contains(full, c.Expect.FullViewContains))
			}
		}
	}
	b.noDialogs()
	b.do("top of the inbox", chromedp.Navigate(e.url+"/"), chromedp.WaitVisible(css(`#count`)))
	b.screenshot("approver-inbox.png")
	b.noDialogs()
}

// TestWebTemporalUIShowsTurnAwaitingConfirmation: the Temporal UI of the dev server shows a
// turn waiting for a human (status awaiting-confirmation, one pending confirmation): the
// screenshot docs/screenshots/temporal-ui-awaiting.png.
func TestWebTemporalUIShowsTurnAwaitingConfirmation(t *testing.T) {
	t.Parallel()
	if devServer.UIAddress == "" {
		t.Fatal("the test dev server runs without its UI")
	}
	e := newWebEnv(t, map[string][]string{"pay rent": {calls(call("c1", "send_money", moneyArgs))}})
	run := e.startTurn("web-temporal-ui", workflows.TurnRequest{Message: "pay rent", Principal: "alice"})
	waitPending(t, e.c, run.GetID(), map[string]bool{})
	b := newTab(t)
	b.do("Temporal UI", chromedp.Navigate(devServer.UIAddress+"/namespaces/"+devServer.Namespace+"/workflows/"+url.PathEscape(run.GetID())+"/"+run.GetRunID()+"/history"))
	eventually(t, 60*time.Second, "the Temporal UI to show the turn", func() bool {
		body, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		return strings.Contains(body, run.GetID()) && strings.Contains(body, "Running")
	})
	b.screenshot("temporal-ui-awaiting.png")
}
