package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-dev/airlock/internal/proposals"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/workflows"
)

// proposalCall is one call of the fake ProposalDecideFunc.
type proposalCall struct {
	ProposalID, Disposition, Replacement, Actor string
}

type proposalRecorder struct {
	mu    sync.Mutex
	calls []proposalCall
	out   ProposalOutcome
	err   error
}

func (p *proposalRecorder) decide(_ context.Context, row store.ProposalRow, disp, text, _, actor string) (ProposalOutcome, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, proposalCall{row.ID, disp, text, actor})
	return p.out, p.err
}

// proposal stores one captured memory-change proposal with proposed text text, settled like
// a turn that captured it; it returns the proposal id.
func (e *env) proposal(wf, text string) string {
	e.t.Helper()
	id := proposals.ProposalID(wf, proposals.KindMemory)
	p := proposals.Proposal{ID: id, Kind: proposals.KindMemory, State: proposals.StateAgentProposed,
		Proposer: proposals.Provenance{WorkflowID: wf, OutputID: proposals.OutputID(wf), SnapshotID: "snap-1"},
		Reason:   "because <b>I</b> said\u202e so", Memory: &proposals.MemoryBinding{DocumentID: "doc-1", Path: "memory.md", VersionID: "v1"},
		Operation: "append", ProposedText: text, TextLength: len(text), TextSHA256: proposals.Digest([]byte(text))}
	if _, err := e.st.PutSnapshot(context.Background(), "snap-1", wf, 1, []byte(`{"id":"snap-1"}`)); err != nil {
		e.t.Fatal(err)
	}
	err := e.st.Settle(context.Background(), store.Settlement{WorkflowID: wf, Conversation: "c",
		Proposals: []store.ProposalRow{{ID: id, Kind: p.Kind, WorkflowID: wf, Conversation: "c", OutputID: p.Proposer.OutputID, SnapshotID: "snap-1", Payload: p.Encode()}},
		Result:    json.RawMessage(`{"status":"completed"}`)})
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

func TestProposalsPageNeedsASession(t *testing.T) {
	e := newEnv(t)
	id := e.proposal("turn/c/1", "remember this")
	b := e.browser()
	if resp, _ := b.get("/proposals"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Errorf("GET /proposals signed out = %d %q, want a redirect to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := b.post("/proposals/decide", url.Values{"proposal_id": {id}, "disposition": {"accept"}}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /proposals/decide signed out = %d, want 401", resp.StatusCode)
	}
	if len(e.pr.calls) != 0 {
		t.Fatalf("a signed-out request decided: %+v", e.pr.calls)
	}
	b.login("alice", "correct horse")
	resp, page := b.get("/")
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `href="/proposals"`) {
		t.Errorf("the nav has no Proposals link")
	}
	if resp, page := b.get("/proposals"); resp.StatusCode != http.StatusOK || !strings.Contains(page, `data-proposal="`+id+`"`) {
		t.Fatalf("GET /proposals signed in = %d, without the pending proposal:\n%s", resp.StatusCode, page)
	}
}

func TestAHostileProposalIsEscapedAndCut(t *testing.T) {
	e := newEnv(t)
	long := strings.Repeat("x", 700) + "TAIL-MARK"
	e.proposal("turn/c/1", `<script>alert(1)</script>"><img src=x onerror=alert(2)>`+"\u202e\u2066gpj\u2069\u200b "+long)
	b := e.browser()
	b.login("alice", "correct horse")
	_, page := b.get("/proposals")
	for _, bad := range []string{"<script>alert", "<img src=x", "<b>I</b>", "\u202e", "\u200b", "\u2066"} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q raw", bad)
		}
	}
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;U&#43;202E&gt;", "&lt;U&#43;2066&gt;", "&lt;U&#43;200B&gt;",
		`data-flag="bidi_control"`, `data-flag="invisible"`, "&lt;b&gt;I&lt;/b&gt;", "show all", "memory.md"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// The cut value keeps its tail only in the show-all disclosure.
	if i, j := strings.Index(page, "TAIL-MARK"), strings.Index(page, "show all"); i < 0 || i < j {
		t.Errorf("the long text's tail is not (only) under show all")
	}
}

func TestProposalDecisionsNeedCSRFAndSameOriginAndUseTheSession(t *testing.T) {
	e := newEnv(t)
	id := e.proposal("turn/c/1", "remember this")
	e.pr.out = ProposalOutcome{Inserted: true, Decision: store.ProposalDecision{ID: "pd-1", ProposalID: id, Disposition: proposals.Edit, Actor: "alice"},
		Status: workflows.ProposalStatus{State: "applied", ReceiptID: "rc-1", Receipt: proposals.ReceiptMaterialized}}
	b := e.browser()
	b.login("alice", "correct horse")
	token := b.csrf()
	form := url.Values{"proposal_id": {id}, "disposition": {"edit"}, "replacement": {"line one\r\nline two \u00e9 "}, "approver": {"mallory"}}
	if resp, body := b.post("/proposals/decide", form); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "CSRF") {
		t.Errorf("POST without a CSRF token = %d %q, want 403", resp.StatusCode, body)
	}
	form.Set("csrf", token)
	if resp, _ := b.do("POST", "/proposals/decide", form, "https://evil.example"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin POST = %d, want 403", resp.StatusCode)
	}
	if len(e.pr.calls) != 0 {
		t.Fatalf("a refused request decided: %+v", e.pr.calls)
	}
	resp, page := b.post("/proposals/decide", form)
	if resp.StatusCode != http.StatusOK || len(e.pr.calls) != 1 {
		t.Fatalf("valid POST = %d, calls %d", resp.StatusCode, len(e.pr.calls))
	}
	want := proposalCall{ProposalID: id, Disposition: proposals.Edit, Replacement: "line one\nline two \u00e9 ", Actor: "alice"}
	if e.pr.calls[0] != want {
		t.Fatalf("decision = %+v, want %+v (the textarea's exact value, the session's approver)", e.pr.calls[0], want)
	}
	if !strings.Contains(page, "Recorded: "+id+" edited by alice") || !strings.Contains(page, proposals.ReceiptMaterialized) {
		t.Errorf("the outcome is not shown:\n%s", page)
	}
	// An empty edit is refused before anything is sent.
	form.Set("replacement", "")
	if resp, _ := b.post("/proposals/decide", form); resp.StatusCode != http.StatusBadRequest || len(e.pr.calls) != 1 {
		t.Errorf("empty edit = %d, calls %d; want 400 and nothing sent", resp.StatusCode, len(e.pr.calls))
	}
}

func TestProposalOutcomeTexts(t *testing.T) {
	d := store.ProposalDecision{ID: "pd-1", Disposition: proposals.Accept, Actor: "bob\u202e"}
	if o := proposalOutcomeText("p1", ProposalOutcome{Conflict: true, Decision: d}); o.OK || !strings.Contains(o.Text, "Conflict: p1 already has another decision (accept by bob<U+202E>, pd-1)") {
		t.Errorf("conflict = %+v", o)
	}
	if o := proposalOutcomeText("p1", ProposalOutcome{Decision: d}); !o.OK || !strings.HasPrefix(o.Text, "Converged: the same decision (accepted)") {
		t.Errorf("converged = %+v", o)
	}
	if o := proposalOutcomeText("p1", ProposalOutcome{Inserted: true, Decision: store.ProposalDecision{ID: "pd-1", Disposition: proposals.Reject, Actor: "bob"},
		Pending: errors.New("deadline")}); !o.OK || !strings.Contains(o.Text, "rejected by bob") || !strings.Contains(o.Text, "Not applied yet") {
		t.Errorf("pending = %+v", o)
	}
}
