package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"
	tclient "go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workflows"
)

// Passkeys end to end (issue 21, item 3): real PostgreSQL, a real Temporal dev server, the
// real `airlock web` binary and a real headless Chromium whose DevTools virtual authenticator
// (CTAP2, internal transport, resident keys, user verification) is the approver's passkey.
// send_money's policy says "approval/passkey": true.

// newPasskeyEnv is newWebEnv with send_money requiring a passkey (and the four-eyes rule).
func newPasskeyEnv(t *testing.T, routes map[string][]string) *webEnv {
	t.Helper()
	browserPath(t)
	e := &webEnv{durEnv: newDurEnv(t)}
	src := registry.Source{Name: "web-test", Data: []byte(webRegistry)}
	base := registry.StructuralPolicy("passkey-test policy", "passkey-test.1", func(e registry.Entry) bool { return e.ID == "test.send-money" }, src)
	var doc registry.PolicyDocument
	if err := json.Unmarshal(base.Data, &doc); err != nil {
		t.Fatal(err)
	}
	for i := range doc.Capabilities {
		if doc.Capabilities[i].ID == "test.send-money" {
			doc.Capabilities[i].Passkey = true
		}
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.Load([]registry.Source{src, {Name: base.Name, Data: data}}, []registry.Implementation{
		effect[urlArgs](e.durEnv, "test.web-fetch", "web_fetch", `{"body":"<html>page</html>"}`),
		effect[sendMoneyArgs](e.durEnv, "test.send-money", "send_money", `{"sent":true}`),
		effect[sendEmailArgs](e.durEnv, "test.send-email", "send_email", `{"sent":true}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if pe, ok := reg.Policy().Entry("test.send-money@1"); !ok || !pe.Passkey {
		t.Fatalf("the policy does not require a passkey for send_money: %+v", pe)
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
	// Passkeys need a host name as relying party: browsers refuse an IP address. The page is
	// opened as http://localhost:PORT (a secure context, and one of the page's default hosts).
	e.url = strings.Replace(e.startWeb(), "127.0.0.1", "localhost", 1)
	return e
}

// addAuthenticator gives the tab a virtual platform authenticator that verifies its user.
func (b *tab) addAuthenticator() webauthn.AuthenticatorID {
	b.t.Helper()
	if _, err := chromedp.Call(b.ctx, webauthn.Enable, webauthn.EnableParams{}); err != nil {
		b.t.Fatalf("WebAuthn.enable: %v", err)
	}
	res, err := chromedp.Call(b.ctx, webauthn.AddVirtualAuthenticator, webauthn.AddVirtualAuthenticatorParams{Options: &webauthn.VirtualAuthenticatorOptions{
		Protocol: webauthn.AuthenticatorProtocolCtap2, Ctap2version: webauthn.Ctap2versionCtap21, Transport: webauthn.AuthenticatorTransportInternal,
		HasResidentKey: true, HasUserVerification: true, IsUserVerified: true, AutomaticPresenceSimulation: true}})
	if err != nil {
		b.t.Fatalf("WebAuthn.addVirtualAuthenticator: %v", err)
	}
	return res.AuthenticatorID
}

func (b *tab) credentials(id webauthn.AuthenticatorID) []*webauthn.Credential {
	b.t.Helper()
	res, err := chromedp.Call(b.ctx, webauthn.GetCredentials, webauthn.GetCredentialsParams{AuthenticatorID: id})
	if err != nil {
		b.t.Fatalf("WebAuthn.getCredentials: %v", err)
	}
	return res.Credentials
}

// credentialToAdd is the part of a webauthn.Credential WebAuthn.addCredential takes (the
// generated type always sends generateCmtgKeyOnNextOperation, which Chromium's virtual
// authenticator refuses).
type credentialToAdd struct {
	CredentialID         []byte  `json:"credentialId"`
	IsResidentCredential bool    `json:"isResidentCredential"`
	RpID                 string  `json:"rpId"`
	PrivateKey           []byte  `json:"privateKey"`
	UserHandle           []byte  `json:"userHandle,omitempty"`
	SignCount            float64 `json:"signCount"`
}

type addCredentialParams struct {
	AuthenticatorID webauthn.AuthenticatorID `json:"authenticatorId"`
	Credential      credentialToAdd          `json:"credential"`
}

var addCredential = cdp.Command[addCredentialParams, cdp.Empty]{Method: webauthn.CommandAddCredential}

// addCredential puts c (another authenticator's passkey, with its private key) into the tab's
// authenticator id.
func (b *tab) addCredential(id webauthn.AuthenticatorID, c *webauthn.Credential) {
	b.t.Helper()
	if _, err := chromedp.Call(b.ctx, addCredential, addCredentialParams{AuthenticatorID: id, Credential: credentialToAdd{CredentialID: c.CredentialID,
		IsResidentCredential: c.IsResidentCredential, RpID: c.RpID, PrivateKey: c.PrivateKey, UserHandle: c.UserHandle, SignCount: c.SignCount}}); err != nil {
		b.t.Fatalf("WebAuthn.addCredential: %v", err)
	}
}

// registerPasskey registers the tab's authenticator's passkey on the Passkeys page.
func (b *tab) registerPasskey(base, name string) {
	b.t.Helper()
	b.do("register a passkey",
		chromedp.Navigate(base+"/passkeys"),
		chromedp.WaitVisible(css(`form.register-passkey button`)),
		chromedp.SendKeys(css(`form.register-passkey input[name=name]`), name),
		chromedp.SendKeys(css(`form.register-passkey input[name=password]`), webPassword),
		chromedp.Click(css(`form.register-passkey button`)),
		chromedp.WaitVisible(css(`#passkey-message`)))
	if got := b.text(`#passkey-message`); !strings.Contains(got, "Passkey registered") {
		b.t.Fatalf("registration answer = %q (status %q)", got, b.text(`.passkey-status`))
	}
}

// hold makes the page's passkey forms keep what they would post (the decision, its nonce and
// the authenticator's assertion) in window.__held instead of sending it: an attacker in the
// approver's browser who holds an assertion back, or copies it.
const hold = `window.__held = []; HTMLFormElement.prototype.submit = function () { window.__held.push(new URLSearchParams(new FormData(this)).toString()); }; true`

// heldDecision approves (or denies with a reason) the card's call with the passkey while the
// page holds the post, and returns the held form body.
func (b *tab) heldDecision(base, id, kind, patch string) string {
	b.t.Helper()
	b.waitCard(base, id)
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](hold+";"+patch+"; true")); err != nil {
		b.t.Fatal(err)
	}
	btn := card(id) + ` button.approve`
	if kind == "deny" {
		b.do("type a reason", chromedp.SendKeys(css(card(id)+` form.deny input[name=reason]`), "no"))
		btn = card(id) + ` button.deny`
	}
	b.do("decide with the passkey (held)", chromedp.Click(css(btn)))
	var body string
	eventually(b.t, 30*time.Second, "the held passkey decision", func() bool {
		body = evalAs[string](b, `(window.__held && window.__held[0]) || ""`)
		return body != ""
	})
	if !strings.Contains(body, "passkey=") || !strings.Contains(body, "nonce=") {
		b.t.Fatalf("the held form carries no assertion: %s (status %q)", body, b.text(card(id)+` .passkey-status`))
	}
	return body
}

// post sends a form body to /decide from the signed-in page (same origin, its session) and
// returns the page's answer text.
func (b *tab) post(body string) string {
	b.t.Helper()
	js := fmt.Sprintf(`fetch("/decide", {method: "POST", credentials: "same-origin", headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: %q})
  .then(function (r) { return r.text(); })
  .then(function (h) { const a = new DOMParser().parseFromString(h, "text/html").querySelector("#answer"); return a ? a.innerText : h; })`, body)
	got, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("post a decision: %v", err)
	}
	return got
}

// with replaces form fields of a held body.
func with(body string, kv ...string) string {
	v, _ := url.ParseQuery(body)
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v.Encode()
}

// refusals lists "approver:code" of the turn's confirmation_refused audit rows.
func refusals(t *testing.T, st *store.Store, workflowID string) []string {
	t.Helper()
	rows, err := st.ListAudit(context.Background(), workflowID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		if r.Outcome == activities.AuditConfirmationRefused {
			out = append(out, r.Approver+":"+r.Reason)
		}
	}
	return out
}

func startPaying(t *testing.T, e *webEnv, conv, message string) (tclient.WorkflowRun, workflows.PendingConfirmation) {
	t.Helper()
	run := e.startTurn(conv, workflows.TurnRequest{Message: message, Principal: "carol"})
	p := waitPending(t, e.c, run.GetID(), map[string]bool{})
	if !p.PasskeyRequired {
		t.Fatalf("the pending confirmation of %s does not say it needs a passkey: %+v", conv, p)
	}
	return run, p
}

// TestPasskeyDecisions: alice registers a passkey on the page and approves a passkey-required
// call with it (it runs once, the audit says "passkey"); a decision without an assertion is
// refused passkey_required by the worker, and `airlock approve` refuses to send one; an
// assertion held back and presented after a later one is refused passkey_replayed (its
// counter did not increase), an assertion re-sent for another confirmation, other arguments
// or another decision passkey_invalid (its challenge is not that decision's MAC), bob's
// passkey signing alice's exact decision passkey_unknown, and a removed passkey's assertion
// passkey_unknown. A denial and an edit (by bob, with his passkey) are decided on the page the
// same way. Nothing refused runs; every refusal is audited and the token reissued.
func TestPasskeyDecisions(t *testing.T) {
	t.Parallel()
	other := `{"recipient":"GB29NWBK60161331926819","amount":9999,"subject":"rent","date":"2026-12-01"}`
	e := newPasskeyEnv(t, map[string][]string{
		"pay rent": {calls(call("c1", "send_money", moneyArgs))},
		"pay more": {calls(call("c1", "send_money", other))},
	})
	alice, bob := newTab(t), newTab(t)
	alice.signIn(e.url, "alice")
	bob.signIn(e.url, "bob")
	aliceAuth, bobAuth := alice.addAuthenticator(), bob.addAuthenticator()
	// A session alone registers nothing: the password is asked again.
	alice.do("register with a wrong password", chromedp.Navigate(e.url+"/passkeys"), chromedp.WaitVisible(css(`form.register-passkey button`)),
		chromedp.SendKeys(css(`form.register-passkey input[name=password]`), "not her password"), chromedp.Click(css(`form.register-passkey button`)))
	eventually(t, 30*time.Second, "the page refusing a wrong password", func() bool {
		return strings.Contains(alice.text(`.passkey-status`), "Wrong password")
	})
	if n := len(alice.credentials(aliceAuth)); n != 0 {
		t.Fatalf("the authenticator made %d credential(s) after a wrong password", n)
	}
	alice.registerPasskey(e.url, "alice laptop")
	bob.registerPasskey(e.url, "bob phone")
	if pks, err := e.st.ListPasskeys(context.Background(), "alice"); err != nil || len(pks) != 1 || pks[0].Name != "alice laptop" || len(pks[0].PublicKey) == 0 {
		t.Fatalf("alice's stored passkeys = %+v, %v", pks, err)
	}
	if got := alice.text(`#passkeys`); !strings.Contains(got, "alice laptop") {
		t.Fatalf("the Passkeys page does not list the new passkey: %q", got)
	}

	// 1. A decision without an assertion: the CLI refuses to send it; sent anyway (signed as
	// the page would, without the passkey), the worker refuses it passkey_required.
	runA, pA := startPaying(t, e, "passkey-a", "pay rent")
	cmd := exec.Command(airlockBin, "approve", pA.ConfirmationID, "--credential", itCredentials["alice"])
	cmd.Env = append(os.Environ(), "AIRLOCK_HOME="+e.home, "AIRLOCK_DATABASE_URL="+e.dbURL, "AIRLOCK_APPROVERS="+e.approvers, "AIRLOCK_APPROVER_KEY=",
		"AIRLOCK_APPROVER_KEY_FILE=", "TEMPORAL_ADDRESS="+devServer.Address, "TEMPORAL_NAMESPACE="+devServer.Namespace)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "must be decided with a passkey") || !strings.Contains(string(out), "approver page") {
		t.Fatalf("`airlock approve` on a passkey-required call: %v\n%s", err, out)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
	defer ccancel()
	cl, err := client.New(cctx, e.c, client.Options{TaskQueue: e.queue, DatabaseURL: e.dbURL,
		ApproverKeyFile: config.Config{Home: e.home}.KeyFile(), CredentialFile: itCredentials["alice"]})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var de *client.DecisionError
	if err := cl.Decide(cctx, client.DecideRequest{ConfirmationID: pA.ConfirmationID, Decision: client.Approve}); !errors.As(err, &de) || de.Code != activities.PasskeyRequired {
		t.Fatalf("client.Decide on a passkey-required call = %v, want passkey_required", err)
	}
	pend := exec.Command(airlockBin, "pending")
	pend.Env = cmd.Env
	if out, err := pend.CombinedOutput(); err != nil || !strings.Contains(string(out), "passkey:     required") {
		t.Fatalf("airlock pending does not say a passkey is required: %v\n%s", err, out)
	}
	surface, err := approvers.LoadCredential(filepath.Join(e.home, "keys", "surface-web.json"))
	if err != nil {
		t.Fatal(err)
	}
	row, err := e.st.GetConfirmation(context.Background(), pA.ConfirmationID)
	if err != nil || !row.PasskeyRequired {
		t.Fatalf("stored confirmation = %+v, %v", row, err)
	}
	bare := row
	bare.PasskeyRequired = false // what a surface that ignores the rule would sign
	d, err := approval.Sign(e.key, bare, approval.Request{ConfirmationID: row.ID, Decision: workflows.DecisionApprove, Approver: "alice",
		ArgsDigest: row.ArgsDigest, Signer: surface}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.SignalWorkflow(context.Background(), row.WorkflowID, row.RunID, workflows.SignalConfirmation, d); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ref *approval.RefusedError
	if err := approval.Wait(ctx, e.st, d, 30*time.Second); !errors.As(err, &ref) || ref.Code != activities.PasskeyRequired || !ref.Reissued {
		t.Fatalf("a decision without a passkey assertion = %v, want passkey_required (reissued)", err)
	}

	// 2. Approve with the passkey on the page: the call runs once, and every surface says how
	// alice proved it.
	alice.waitCard(e.url, pA.ConfirmationID)
	if got := alice.text(card(pA.ConfirmationID) + ` .passkey-note`); !strings.Contains(got, "only with your passkey") {
		t.Fatalf("the card does not say it needs a passkey: %q", got)
	}
	alice.do("approve with the passkey", chromedp.Click(css(card(pA.ConfirmationID)+` button.approve`)), chromedp.WaitVisible(css(`#answer`)))
	if got := alice.text(`#answer`); !strings.Contains(got, "Approved "+pA.ConfirmationID+" as alice") {
		t.Fatalf("answer = %q", got)
	}
	res := result(t, runA)
	if len(res.Outcomes) != 1 || res.Outcomes[0].Outcome != activities.OutcomeExecuted || res.Outcomes[0].Approver != "alice" {
		t.Fatalf("outcomes = %+v", res.Outcomes)
	}
	if n := len(e.rec.of("send_money")); n != 1 {
		t.Fatalf("send_money ran %d times, want once", n)
	}
	if row, _ := e.st.GetConfirmation(context.Background(), pA.ConfirmationID); row.ApproverProof != "passkey on approver page web" {
		t.Fatalf("approver proof = %q", row.ApproverProof)
	}
	if got := strings.Join(refusals(t, e.st, runA.GetID()), " "); got != "alice:"+activities.PasskeyRequired {
		t.Fatalf("refusals of turn A = %q", got)
	}
	audit := exec.Command(airlockBin, "audit", "--turn", runA.GetID())
	audit.Env = cmd.Env
	if out, err := audit.CombinedOutput(); err != nil || !strings.Contains(string(out), "approved by alice (passkey on approver page web)") {
		t.Fatalf("airlock audit --turn: %v\n%s", err, out)
	}
	if pk, _ := e.st.ListPasskeys(context.Background(), "alice"); len(pk) != 1 || pk[0].SignCount == 0 || pk[0].LastUsedAt == nil {
		t.Fatalf("alice's passkey after use = %+v", pk)
	}

	// 3. Replay: alice's assertion for B is held back, one for C made after it is sent (C runs);
	// then B's is presented: a valid signature over B's MAC, but its counter is below C's.
	runB, pB := startPaying(t, e, "passkey-b", "pay rent")
	runC, pC := startPaying(t, e, "passkey-c", "pay rent")
	heldB := alice.heldDecision(e.url, pB.ConfirmationID, "approve", "")
	heldC := alice.heldDecision(e.url, pC.ConfirmationID, "approve", "")
	if got := alice.post(heldC); !strings.Contains(got, "Approved "+pC.ConfirmationID+" as alice") {
		t.Fatalf("C's assertion: %q", got)
	}
	if res := result(t, runC); len(res.Outcomes) != 1 || res.Outcomes[0].Outcome != activities.OutcomeExecuted {
		t.Fatalf("turn C outcomes = %+v", res.Outcomes)
	}
	if got := alice.post(heldB); !strings.Contains(got, activities.PasskeyReplayed) {
		t.Fatalf("B's held-back assertion after C's: %q, want passkey_replayed", got)
	}
	// The same post of C again: C is decided, nothing more runs.
	if got := alice.post(heldC); !strings.Contains(got, "Not decided") {
		t.Fatalf("C's assertion re-sent: %q", got)
	}
	if n := len(e.rec.of("send_money")); n != 2 {
		t.Fatalf("send_money ran %d times, want 2 (A and C)", n)
	}

	// 4. An assertion made for one decision, sent with another: other arguments (turn D's
	// confirmation), or a denial instead of the approval it signed.
	runD, pD := startPaying(t, e, "passkey-d", "pay more")
	if pD.ArgsDigest == pB.ArgsDigest {
		t.Fatal("D's arguments must differ from B's")
	}
	heldB2 := alice.heldDecision(e.url, pB.ConfirmationID, "approve", "")
	if got := alice.post(with(heldB2, "confirmation_id", pD.ConfirmationID, "args_digest", pD.ArgsDigest)); !strings.Contains(got, activities.PasskeyInvalid) {
		t.Fatalf("B's assertion for D's arguments: %q, want passkey_invalid", got)
	}
	// (A fresh one: the nonce of the first is spent, nonce_replayed, wherever it is sent.)
	heldB2 = alice.heldDecision(e.url, pB.ConfirmationID, "approve", "")
	if got := alice.post(with(heldB2, "decision", "deny", "reason", "not this")); !strings.Contains(got, activities.PasskeyInvalid) {
		t.Fatalf("an approval's assertion sent with a denial: %q, want passkey_invalid", got)
	}

	// A denial is decided with the passkey too (the reason reaches the model), on the page.
	alice.waitCard(e.url, pD.ConfirmationID)
	alice.do("deny D with the passkey", chromedp.SendKeys(css(card(pD.ConfirmationID)+` form.deny input[name=reason]`), "too much"),
		chromedp.Click(css(card(pD.ConfirmationID)+` button.deny`)), chromedp.WaitVisible(css(`#answer`)))
	if got := alice.text(`#answer`); !strings.Contains(got, "Denied "+pD.ConfirmationID+" as alice") {
		t.Fatalf("denial answer = %q", got)
	}
	if res := result(t, runD); len(res.Outcomes) != 1 || res.Outcomes[0].Outcome != activities.OutcomeDenied {
		t.Fatalf("turn D outcomes = %+v", res.Outcomes)
	}

	// 5. bob's passkey signs alice's exact decision: the key is moved into alice's authenticator
	// (hers taken out) and the page's request no longer restricts which passkey answers.
	bobCreds := bob.credentials(bobAuth)
	aliceCreds := alice.credentials(aliceAuth)
	if len(bobCreds) != 1 || len(aliceCreds) != 1 {
		t.Fatalf("authenticators hold %d (bob) and %d (alice) credentials", len(bobCreds), len(aliceCreds))
	}
	if _, err := chromedp.Call(alice.ctx, webauthn.RemoveCredential, webauthn.RemoveCredentialParams{AuthenticatorID: aliceAuth, CredentialID: aliceCreds[0].CredentialID}); err != nil {
		t.Fatal(err)
	}
	alice.addCredential(aliceAuth, bobCreds[0])
	heldBob := alice.heldDecision(e.url, pB.ConfirmationID, "approve", `const g = navigator.credentials.get.bind(navigator.credentials);
navigator.credentials.get = function (o) { delete o.publicKey.allowCredentials; return g(o); }`)
	if got := alice.post(heldBob); !strings.Contains(got, activities.PasskeyUnknown) {
		t.Fatalf("alice's decision signed by bob's passkey: %q, want passkey_unknown", got)
	}
	// alice's own passkey back.
	if _, err := chromedp.Call(alice.ctx, webauthn.ClearCredentials, webauthn.ClearCredentialsParams{AuthenticatorID: aliceAuth}); err != nil {
		t.Fatal(err)
	}
	alice.addCredential(aliceAuth, aliceCreds[0])

	// 6. A removed passkey: an assertion made before the removal decides nothing after it.
	heldB3 := alice.heldDecision(e.url, pB.ConfirmationID, "approve", "")
	alice.do("remove the passkey", chromedp.Navigate(e.url+"/passkeys"), chromedp.Click(css(`form.remove-passkey button`)), chromedp.WaitVisible(css(`#passkey-message`)))
	if got := alice.text(`#passkey-message`); !strings.Contains(got, "Passkey removed") {
		t.Fatalf("removal answer = %q", got)
	}
	if got := alice.post(heldB3); !strings.Contains(got, activities.PasskeyUnknown) {
		t.Fatalf("a removed passkey's assertion: %q, want passkey_unknown", got)
	}
	// With no passkey left the page refuses to ask for one.
	alice.waitCard(e.url, pB.ConfirmationID)
	alice.do("approve without a passkey", chromedp.Click(css(card(pB.ConfirmationID)+` button.approve`)))
	eventually(t, 30*time.Second, "the page saying a passkey is needed", func() bool {
		return strings.Contains(alice.text(card(pB.ConfirmationID)+` .passkey-status`), "register one under Passkeys first")
	})

	// 7. bob edits B with his passkey: the original is denied (edited_by_approver) and his
	// arguments run once, as a new proposal the edit confirmed.
	edited := `{"recipient":"GB29NWBK60161331926819","amount":100,"subject":"rent","date":"2026-12-01"}`
	bob.waitCard(e.url, pB.ConfirmationID)
	bob.do("edit B with the passkey", chromedp.Click(css(card(pB.ConfirmationID)+` details.edit summary`)),
		chromedp.SetValue(css(card(pB.ConfirmationID)+` form.edit textarea`), edited),
		chromedp.Click(css(card(pB.ConfirmationID)+` button.edit`)), chromedp.WaitVisible(css(`#answer`)))
	if got := bob.text(`#answer`); !strings.Contains(got, "Edited "+pB.ConfirmationID+" as bob") {
		t.Fatalf("edit answer = %q", got)
	}
	if res := result(t, runB); len(res.Outcomes) != 2 || res.Outcomes[1].Outcome != activities.OutcomeExecuted || res.Outcomes[1].Approver != "bob" {
		t.Fatalf("turn B outcomes = %+v", res.Outcomes)
	}
	if got := e.rec.of("send_money"); len(got) != 3 || got[2] != canon(t, edited) {
		t.Fatalf("send_money ran %v, want A, C and bob's edit", got)
	}
	// An operator lists and removes a passkey (a lost authenticator) from the command line.
	bobKeys, _ := e.st.ListPasskeys(context.Background(), "bob")
	list := exec.Command(airlockBin, "approvers", "passkeys", "bob")
	list.Env = cmd.Env
	if out, err := list.CombinedOutput(); err != nil || len(bobKeys) != 1 || !strings.Contains(string(out), bobKeys[0].CredentialID) || !strings.Contains(string(out), `"bob phone"`) {
		t.Fatalf("airlock approvers passkeys bob: %v\n%s", err, out)
	}
	rm := exec.Command(airlockBin, "approvers", "passkeys", "bob", "--remove", bobKeys[0].CredentialID)
	rm.Env = cmd.Env
	if out, err := rm.CombinedOutput(); err != nil || !strings.Contains(string(out), "decides nothing from now on") {
		t.Fatalf("airlock approvers passkeys bob --remove: %v\n%s", err, out)
	}
	if l, _ := e.st.ListPasskeys(context.Background(), "bob"); len(l) != 0 {
		t.Fatalf("bob's passkeys after the operator removed his = %+v", l)
	}
	want := "alice:" + strings.Join([]string{activities.PasskeyReplayed, activities.PasskeyInvalid,
		activities.PasskeyUnknown, activities.PasskeyUnknown}, " alice:")
	if got := strings.Join(refusals(t, e.st, runB.GetID()), " "); got != want {
		t.Fatalf("refusals of turn B = %q, want %q", got, want)
	}
	if got := strings.Join(refusals(t, e.st, runD.GetID()), " "); got != "alice:"+activities.PasskeyInvalid {
		t.Fatalf("refusals of turn D = %q", got)
	}
	var reissued int
	rows, _ := e.st.ListAudit(context.Background(), runB.GetID())
	for _, r := range rows {
		if r.Outcome == activities.AuditTokenReissued {
			reissued++
		}
	}
	if reissued != 4 {
		t.Fatalf("turn B's token was reissued %d times, want 4", reissued)
	}
	alice.noDialogs()
	bob.noDialogs()
}
