package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tclient "go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/passkey/passkeytest"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/workflows"
)

// Attacks on passkey decisions (issue 21, item 3), end to end: real PostgreSQL, a real
// Temporal dev server, the real `airlock web` binary, headless Chromium with the DevTools
// virtual authenticator, and a software authenticator (passkeytest) for what a browser will
// not do on request (a counter that stays 0, an assertion sent as a raw signal).

// softDecision is alice's decision on row signed as the page signs it (its surface key), with
// an assertion by auth with counter n over its MAC, made on origin for the RP id localhost.
func softDecision(t *testing.T, e *webEnv, surface approvers.Credential, auth *passkeytest.Authenticator, id, origin string, n uint32) workflows.Decision {
	t.Helper()
	row, err := e.st.GetConfirmation(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	req := approval.Request{ConfirmationID: id, Decision: workflows.DecisionApprove, Approver: "alice", ArgsDigest: row.ArgsDigest, Signer: surface}
	nonce, mac, err := approval.Challenge(e.key, row, req, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ch, _ := base64.RawURLEncoding.DecodeString(mac)
	as, err := auth.Assert(passkeytest.Assertion{Origin: origin, RPID: "localhost", Challenge: ch, Flags: passkeytest.FlagUP | passkeytest.FlagUV, Counter: n})
	if err != nil {
		t.Fatal(err)
	}
	req.Nonce, req.Passkey = nonce, as
	d, err := approval.Sign(e.key, row, req, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// present signals d to its turn and returns its verdict ("" when accepted, else the code).
func present(t *testing.T, e *webEnv, d workflows.Decision) string {
	t.Helper()
	row, err := e.st.GetConfirmation(context.Background(), d.ConfirmationID)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.SignalWorkflow(context.Background(), row.WorkflowID, row.RunID, workflows.SignalConfirmation, d); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ref *approval.RefusedError
	switch err := approval.Wait(ctx, e.st, d, 45*time.Second); {
	case err == nil:
		return ""
	case errors.As(err, &ref):
		// The verdict is recorded before the refused presentation's token is reissued: wait
		// for the new generation, so the next decision is signed with the token in force.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if now, err := e.st.GetConfirmation(context.Background(), d.ConfirmationID); err != nil || now.Generation != row.Generation || now.Decision != "" {
				break
			}
		}
		return ref.Code
	default:
		t.Fatalf("verdict of %s: %v", d.ConfirmationID, err)
		return ""
	}
}

func csrfOf(b *tab) string {
	return evalAs[string](b, `(document.querySelector('input[name=csrf]') || {}).value || ""`)
}

// TestPasskeyAttacks: every way around the passkey tried by someone who holds less than the
// approver's authenticator, or who holds a copy of it.
//
//   - The page's decision form posted without the challenge step: the page sends nothing.
//   - A forged assertion (JSON that is not one, or a 5 KiB one) posted with a real nonce:
//     passkey_invalid, or refused by the page before anything is sent.
//   - alice's genuine assertion held back and presented after the token was reissued (by a
//     refused decision) on the same confirmation: passkey_invalid, nothing runs.
//   - A clone of alice's (counting) authenticator, made with the DevTools, used after the
//     original: passkey_replayed.
//   - A passkey whose counter is always 0 (most synced passkeys): accepted at 0 again and
//     again (W3C WebAuthn §6.1.1: no clone detection is possible), but once it reported a
//     counter, 0 or a lower one is passkey_replayed.
//   - An assertion of 64 KiB sent as a raw signal: malformed_decision, audited with its detail
//     bounded, the token untouched; the decide update refuses it before history.
//   - An assertion made for an edit, sent with other edited arguments or as an approval:
//     passkey_invalid.
//   - An assertion made on another local page (every local port is a passkey origin under the
//     default loopback relying party): the page refuses to send it.
//   - The page reached under a host name it does not serve: 421.
func TestPasskeyAttacks(t *testing.T) {
	t.Parallel()
	e := newPasskeyEnv(t, map[string][]string{"pay rent": {calls(call("c1", "send_money", moneyArgs))}})
	u, _ := url.Parse(e.url)
	origin := "http://" + u.Host
	surface, err := approvers.LoadCredential(filepath.Join(e.home, "keys", "surface-web.json"))
	if err != nil {
		t.Fatal(err)
	}
	alice := newTab(t)
	alice.signIn(e.url, "alice")
	aliceAuth := alice.addAuthenticator()
	alice.registerPasskey(e.url, "alice laptop")

	// 1. The form without the challenge step.
	runA, pA := startPaying(t, e, "attack-a", "pay rent")
	alice.waitCard(e.url, pA.ConfirmationID)
	csrf := csrfOf(alice)
	bare := url.Values{"csrf": {csrf}, "confirmation_id": {pA.ConfirmationID}, "decision": {"approve"}, "args_digest": {pA.ArgsDigest}}
	if got := alice.post(bare.Encode()); !strings.Contains(got, "decided only with your passkey") {
		t.Fatalf("a decision form without the passkey step: %q", got)
	}
	if row, _ := e.st.GetConfirmation(context.Background(), pA.ConfirmationID); row.Generation != 0 || row.Decision != "" {
		t.Fatalf("a decision the page did not send touched the confirmation: %+v", row)
	}

	// 3 (held first). alice's genuine assertion for A, held back.
	heldA := alice.heldDecision(e.url, pA.ConfirmationID, "approve", "")

	// 2. Forged assertions with a real nonce.
	forge := alice.heldDecision(e.url, pA.ConfirmationID, "approve", "")
	if got := alice.post(with(forge, "passkey", `{"id":"AAAA","rawId":"AAAA","type":"public-key","response":{}}`)); !strings.Contains(got, activities.PasskeyInvalid) {
		t.Fatalf("a forged assertion: %q, want passkey_invalid", got)
	}
	forge = alice.heldDecision(e.url, pA.ConfirmationID, "approve", "")
	if got := alice.post(with(forge, "passkey", `"`+strings.Repeat("A", 5000)+`"`)); !strings.Contains(got, "not one this page sends") {
		t.Fatalf("a 5 KiB assertion: %q", got)
	}
	if got := alice.post(with(forge, "passkey", `}{`)); !strings.Contains(got, "not one this page sends") {
		t.Fatalf("an assertion that is not JSON: %q", got)
	}
	// The forged one was refused and reissued the token: alice's genuine, held-back assertion
	// signs the MAC under the token it replaced; the page signs the decision again under the
	// current token, whose MAC is not the assertion's challenge.
	if got := alice.post(heldA); !strings.Contains(got, activities.PasskeyInvalid) || !strings.Contains(got, "challenge is not this decision's MAC") {
		t.Fatalf("a genuine assertion presented after a reissue: %q, want passkey_invalid", got)
	}
	if n := len(e.rec.of("send_money")); n != 0 {
		t.Fatalf("send_money ran %d times before any valid decision", n)
	}
	// A fresh passkey decision still approves A (nothing above used it up), once.
	alice.waitCard(e.url, pA.ConfirmationID)
	if got := alice.post(alice.heldDecision(e.url, pA.ConfirmationID, "approve", "")); !strings.Contains(got, "Approved "+pA.ConfirmationID) {
		t.Fatalf("alice's approval after the attacks: %q", got)
	}
	if res := result(t, runA); len(res.Outcomes) != 1 || res.Outcomes[0].Outcome != activities.OutcomeExecuted {
		t.Fatalf("turn A outcomes = %+v", res.Outcomes)
	}
	if got := strings.Join(refusals(t, e.st, runA.GetID()), " "); got != "alice:"+activities.PasskeyInvalid+" alice:"+activities.PasskeyInvalid {
		t.Fatalf("refusals of turn A = %q", got)
	}

	// 4. A clone of alice's authenticator (the credential with its private key and counter,
	// copied into another browser signed in as alice: a stolen session and a copied key).
	mallory := newTab(t)
	mallory.signIn(e.url, "alice")
	malloryAuth := mallory.addAuthenticator()
	creds := alice.credentials(aliceAuth)
	if len(creds) != 1 || creds[0].SignCount == 0 {
		t.Fatalf("alice's authenticator holds %+v", creds)
	}
	mallory.addCredential(malloryAuth, creds[0])
	runB, pB := startPaying(t, e, "attack-b", "pay rent")
	runC, pC := startPaying(t, e, "attack-c", "pay rent")
	if got := alice.post(alice.heldDecision(e.url, pB.ConfirmationID, "approve", "")); !strings.Contains(got, "Approved "+pB.ConfirmationID) {
		t.Fatalf("alice's approval of B: %q", got)
	}
	if got := mallory.post(mallory.heldDecision(e.url, pC.ConfirmationID, "approve", "")); !strings.Contains(got, activities.PasskeyReplayed) {
		t.Fatalf("the clone's approval of C after the original's: %q, want passkey_replayed", got)
	}
	result(t, runB)

	// 5. A passkey that never counts (counter 0), sent as raw signals.
	soft, err := passkeytest.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.AddPasskey(context.Background(), store.Passkey{CredentialID: soft.ID(), Approver: "alice", PublicKey: soft.PublicKey(), Name: "synced"}); err != nil {
		t.Fatal(err)
	}
	// 6 first: a 64 KiB assertion as a raw signal on C.
	big := softDecision(t, e, surface, soft, pC.ConfirmationID, origin, 0)
	big.Passkey = []byte(`"` + strings.Repeat("A", 64<<10) + `"`)
	if err := e.c.SignalWorkflow(context.Background(), runC.GetID(), runC.GetRunID(), workflows.SignalConfirmation, big); err != nil {
		t.Fatal(err)
	}
	eventually(t, 45*time.Second, "the oversized assertion refused", func() bool {
		return strings.Contains(strings.Join(refusals(t, e.st, runC.GetID()), " "), workflows.RefusalMalformed)
	})
	audit, _ := e.st.ListAudit(context.Background(), runC.GetID())
	for _, r := range audit {
		if r.Reason == workflows.RefusalMalformed && len(r.Detail) > 2048 {
			t.Fatalf("the malformed decision's audit detail is %d bytes", len(r.Detail))
		}
	}
	genBefore := func() int {
		row, _ := e.st.GetConfirmation(context.Background(), pC.ConfirmationID)
		return int(row.Generation)
	}
	gen := genBefore()
	// The decide update refuses it before it reaches history.
	uctx, ucancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ucancel()
	h, err := e.c.UpdateWorkflow(uctx, tclient.UpdateWorkflowOptions{WorkflowID: runC.GetID(), RunID: runC.GetRunID(), UpdateName: workflows.UpdateDecide,
		Args: []any{big}, WaitForStage: tclient.WorkflowUpdateStageCompleted})
	if err == nil {
		var res workflows.DecisionResult
		err = h.Get(uctx, &res)
	}
	if err == nil || !strings.Contains(err.Error(), "passkey assertion") {
		t.Fatalf("the decide update with a 64 KiB assertion = %v, want a refusal naming the assertion", err)
	}
	if g := genBefore(); g != gen {
		t.Fatalf("the oversized assertion reissued the token (generation %d -> %d)", gen, g)
	}
	// Counter 0, on C: accepted; on D, counter 0 again: accepted (nothing to compare).
	if code := present(t, e, softDecision(t, e, surface, soft, pC.ConfirmationID, origin, 0)); code != "" {
		t.Fatalf("a counter-0 passkey's first approval = %q", code)
	}
	result(t, runC)
	runD, pD := startPaying(t, e, "attack-d", "pay rent")
	if code := present(t, e, softDecision(t, e, surface, soft, pD.ConfirmationID, origin, 0)); code != "" {
		t.Fatalf("a counter-0 passkey's second approval at 0 = %q", code)
	}
	result(t, runD)
	// Once it counts (3), a 0 or a lower counter is a clone or a reset: passkey_replayed.
	runE, pE := startPaying(t, e, "attack-e", "pay rent")
	if code := present(t, e, softDecision(t, e, surface, soft, pE.ConfirmationID, origin, 3)); code != "" {
		t.Fatalf("the passkey's first counting approval = %q", code)
	}
	result(t, runE)
	runF, pF := startPaying(t, e, "attack-f", "pay rent")
	for _, n := range []uint32{0, 2, 3} {
		if code := present(t, e, softDecision(t, e, surface, soft, pF.ConfirmationID, origin, n)); code != activities.PasskeyReplayed {
			t.Fatalf("counter %d after 3 = %q, want passkey_replayed", n, code)
		}
	}
	if code := present(t, e, softDecision(t, e, surface, soft, pF.ConfirmationID, origin, 4)); code != "" {
		t.Fatalf("counter 4 after 3 = %q", code)
	}
	result(t, runF)
	// Made on another origin (the page as 127.0.0.1, or any other site): passkey_invalid.
	runG, pG := startPaying(t, e, "attack-g", "pay rent")
	for _, o := range []string{strings.Replace(origin, "localhost", "127.0.0.1", 1), "https://evil.example", "http://localhost.evil.example:" + u.Port()} {
		if code := present(t, e, softDecision(t, e, surface, soft, pG.ConfirmationID, o, 10)); code != activities.PasskeyInvalid {
			t.Fatalf("an assertion made on %s = %q, want passkey_invalid", o, code)
		}
	}
	if n := len(e.rec.of("send_money")); n != 6 {
		t.Fatalf("send_money ran %d times, want 6 (A to F, each once; G never)", n)
	}
	if row, _ := e.st.GetConfirmation(context.Background(), pG.ConfirmationID); row.Decision != "" {
		t.Fatalf("G was decided by assertions made on other origins: %+v", row)
	}
	// An edit: the assertion made for an edit to amount 1 sent with amount 9999, and sent as an
	// approval, is passkey_invalid; the edit it was made for runs (with amount 1), once.
	small := `{"recipient":"GB29NWBK60161331926819","amount":1,"subject":"rent","date":"2026-12-01"}`
	large := `{"recipient":"GB29NWBK60161331926819","amount":9999,"subject":"rent","date":"2026-12-01"}`
	edit := func(signed, sent, kind string, n uint32) workflows.Decision {
		row, err := e.st.GetConfirmation(context.Background(), pG.ConfirmationID)
		if err != nil {
			t.Fatal(err)
		}
		req := approval.Request{ConfirmationID: row.ID, Decision: workflows.DecisionEdit, Approver: "alice", ArgsDigest: row.ArgsDigest, Signer: surface, Arguments: []byte(signed)}
		nonce, mac, err := approval.Challenge(e.key, row, req, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ch, _ := base64.RawURLEncoding.DecodeString(mac)
		as, err := soft.Assert(passkeytest.Assertion{Origin: origin, RPID: "localhost", Challenge: ch, Flags: passkeytest.FlagUP | passkeytest.FlagUV, Counter: n})
		if err != nil {
			t.Fatal(err)
		}
		req.Nonce, req.Passkey, req.Decision = nonce, as, kind
		req.Arguments = nil
		if kind == workflows.DecisionEdit {
			req.Arguments = []byte(sent)
		}
		d, err := approval.Sign(e.key, row, req, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if code := present(t, e, edit(small, large, workflows.DecisionEdit, 11)); code != activities.PasskeyInvalid {
		t.Fatalf("an edit's assertion sent with other arguments = %q, want passkey_invalid", code)
	}
	if code := present(t, e, edit(small, "", workflows.DecisionApprove, 12)); code != activities.PasskeyInvalid {
		t.Fatalf("an edit's assertion sent as an approval = %q, want passkey_invalid", code)
	}
	if code := present(t, e, edit(small, small, workflows.DecisionEdit, 13)); code != "" {
		t.Fatalf("the edit its assertion was made for = %q", code)
	}
	if res := result(t, runG); len(res.Outcomes) != 2 || res.Outcomes[1].Outcome != activities.OutcomeExecuted {
		t.Fatalf("turn G outcomes = %+v", res.Outcomes)
	}
	if got := e.rec.of("send_money"); len(got) != 7 || got[6] != canon(t, small) {
		t.Fatalf("send_money ran %v, want A to F and G's edit (amount 1)", got)
	}

	// A clone racing the original: two decisions on two calls with the same counter (14, after
	// G's 13), presented at once: exactly one counts, the other is passkey_replayed.
	runH, pH := startPaying(t, e, "attack-h", "pay rent")
	runI, pI := startPaying(t, e, "attack-i", "pay rent")
	dH, dI := softDecision(t, e, surface, soft, pH.ConfirmationID, origin, 14), softDecision(t, e, surface, soft, pI.ConfirmationID, origin, 14)
	codes := make(chan string, 2)
	for _, d := range []workflows.Decision{dH, dI} {
		go func(d workflows.Decision) {
			row, _ := e.st.GetConfirmation(context.Background(), d.ConfirmationID)
			if err := e.c.SignalWorkflow(context.Background(), row.WorkflowID, row.RunID, workflows.SignalConfirmation, d); err != nil {
				codes <- "signal: " + err.Error()
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var ref *approval.RefusedError
			switch err := approval.Wait(ctx, e.st, d, 45*time.Second); {
			case err == nil:
				codes <- "accepted"
			case errors.As(err, &ref):
				codes <- ref.Code
			default:
				codes <- err.Error()
			}
		}(d)
	}
	got := []string{<-codes, <-codes}
	if !(got[0] == "accepted" && got[1] == activities.PasskeyReplayed) && !(got[1] == "accepted" && got[0] == activities.PasskeyReplayed) {
		t.Fatalf("two decisions with one counter at once = %v, want one accepted and one passkey_replayed", got)
	}
	// The accepted one runs; the refused one waits (its token reissued) until it is cancelled.
	won, lost := runH, runI
	if row, _ := e.st.GetConfirmation(context.Background(), pI.ConfirmationID); row.Decision == store.DecisionApproved {
		won, lost = runI, runH
	}
	if res := result(t, won); len(res.Outcomes) != 1 || res.Outcomes[0].Outcome != activities.OutcomeExecuted {
		t.Fatalf("the accepted racer's outcomes = %+v", res.Outcomes)
	}
	_ = e.c.CancelWorkflow(context.Background(), lost.GetID(), lost.GetRunID())
	if got := e.rec.of("send_money"); len(got) != 8 {
		t.Fatalf("send_money ran %d times, want 8 (the race ran one)", len(got))
	}

	// Through the page: a challenge asked with alice's session, signed by her authenticator on
	// another local page (with the default loopback relying party every local port is a passkey
	// origin, and the worker accepts it), is refused by the page: nothing is sent. Signed on the
	// page itself, the same decision is approved.
	runJ, pJ := startPaying(t, e, "attack-j", "pay rent")
	alice.waitCard(e.url, pJ.ConfirmationID)
	form := url.Values{"csrf": {csrfOf(alice)}, "confirmation_id": {pJ.ConfirmationID}, "decision": {"approve"}, "args_digest": {pJ.ArgsDigest}}
	askJS := fmt.Sprintf(`fetch("/decide/challenge", {method: "POST", credentials: "same-origin", headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: %q}).then(function (r) { return r.text(); })`, form.Encode())
	for i, c := range []struct {
		origin, want string
	}{{"http://localhost:1", "made on another page"}, {origin, "Approved " + pJ.ConfirmationID}} {
		raw, err := chromedp.Run(alice.ctx, chromedp.Evaluate[string](askJS, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		var ans struct {
			Nonce     string `json:"nonce"`
			PublicKey struct {
				Challenge string `json:"challenge"`
			} `json:"publicKey"`
		}
		if err := json.Unmarshal([]byte(raw), &ans); err != nil || ans.Nonce == "" {
			t.Fatalf("challenge = %s (%v)", raw, err)
		}
		ch, _ := base64.RawURLEncoding.DecodeString(ans.PublicKey.Challenge)
		as, err := soft.Assert(passkeytest.Assertion{Origin: c.origin, RPID: "localhost", Challenge: ch, Flags: passkeytest.FlagUP | passkeytest.FlagUV, Counter: uint32(20 + i)})
		if err != nil {
			t.Fatal(err)
		}
		post := url.Values{}
		for k, v := range form {
			post[k] = v
		}
		post.Set("nonce", ans.Nonce)
		post.Set("passkey", string(as))
		if got := alice.post(post.Encode()); !strings.Contains(got, c.want) {
			t.Fatalf("an assertion made on %s through the page: %q, want %q", c.origin, got, c.want)
		}
		if i == 0 {
			if row, _ := e.st.GetConfirmation(context.Background(), pJ.ConfirmationID); row.Generation != 0 || row.Decision != "" {
				t.Fatalf("the refused assertion reached the turn: %+v", row)
			}
		}
	}
	if res := result(t, runJ); len(res.Outcomes) != 1 || res.Outcomes[0].Outcome != activities.OutcomeExecuted {
		t.Fatalf("turn J outcomes = %+v", res.Outcomes)
	}

	// 7. The page under a host name it does not serve.
	req, _ := http.NewRequest(http.MethodGet, e.url+"/login", nil)
	req.Host = "evil.example:" + u.Port()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("GET /login with Host evil.example = %d, want 421", resp.StatusCode)
	}
}
