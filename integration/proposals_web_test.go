package integration

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/proposals"
	"github.com/airlock-dev/airlock/internal/web"
	"github.com/airlock-dev/airlock/workflows"
)

// pageSurface is the surface credential of the in-process approver page of these tests,
// registered once in the shared approvers file (as `airlock web` registers its own).
var pageSurface = sync.OnceValues(func() (approvers.Credential, error) {
	cred, err := approvers.NewCredential("surface:it-proposals-page")
	if err != nil {
		return cred, err
	}
	return cred, approvers.AddSurface(itApprovers, approvers.Surface{Name: "it-proposals-page", PublicKey: cred.Public()})
})

// onePassword is the page's sign-in for these tests: bob with password "pw" (the decision's
// attestation is the surface's, verified by the worker against the approvers file).
type onePassword struct{}

func (onePassword) Has(name string) bool { return name == "bob" }
func (onePassword) Authenticate(name, password string) (string, error) {
	if name == "bob" && password == "pw" {
		return "bob", nil
	}
	return "", errors.New("bad credentials")
}

var pageCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// Item 4's page: a captured correction is decided through the approver page's handler (the
// same proposals.Submit path as the CLI, attested with the page's surface key, applied by the
// real proposal workflow): an edit with a textarea value projects one judgment carrying the
// exact replacement (CRLF from the browser back to LF) by the signed-in approver; the same
// edit again converges; a reject afterwards is shown as a conflict and the edit stands.
func TestProposalDecidedThroughThePage(t *testing.T) {
	model := newFakeModel(t,
		answer("The capital of Australia is Sydney."),
		calls(call("c1", "submit_correction", correctionArgs("latest", secretReplacement))),
	)
	c, cfg, st := liveModelStack(t, model)
	conv := "ppage-" + cfg.TaskQueue
	if r := result(t, startTurnSeq(t, c, cfg, conv, 1, "What is the capital of Australia?")); r.EndReason != "answered" {
		t.Fatalf("turn 1: %+v", r)
	}
	if r := result(t, startTurnSeq(t, c, cfg, conv, 2, "Correct your last reply.")); r.EndReason != "proposed" {
		t.Fatalf("turn 2: %+v", r)
	}
	rows, err := st.ListProposals(context.Background(), workflows.TurnWorkflowID(conv, 2))
	if err != nil || len(rows) != 1 {
		t.Fatalf("proposals: %v %v", rows, err)
	}
	id := rows[0].ID
	surface, err := pageSurface()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := web.New(web.Options{Store: st, Temporal: c, Approvers: func() (web.Authenticator, error) { return onePassword{}, nil },
		Decide:         func(context.Context, approval.Request) error { return errors.New("unused") },
		DecideProposal: web.ProposalDecider(c, st, surface, approvers.NewSource(itApprovers), cfg.TaskQueue),
		Log:            slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	var sid string
	do := func(method, path string, form url.Values) (int, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, hs.URL+path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", hs.URL)
		}
		if sid != "" {
			req.AddCookie(&http.Cookie{Name: web.SessionCookie, Value: sid})
		}
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, ck := range resp.Cookies() {
			if ck.Name == web.SessionCookie {
				sid = ck.Value
			}
		}
		return resp.StatusCode, string(b)
	}
	do("POST", "/login", url.Values{"name": {"bob"}, "password": {"pw"}})
	code, page := do("GET", "/proposals", nil)
	m := pageCSRF.FindStringSubmatch(page)
	if code != http.StatusOK || m == nil || !strings.Contains(page, `data-proposal="`+id+`"`) || !strings.Contains(page, "CORRECTED-ANSWER-7f3a") {
		t.Fatalf("GET /proposals = %d, without the pending correction:\n%s", code, page)
	}
	edit := url.Values{"csrf": {m[1]}, "proposal_id": {id}, "disposition": {"edit"}, "replacement": {"Canberra.\r\nReally. "}}
	code, page = do("POST", "/proposals/decide", edit)
	if code != http.StatusOK || !strings.Contains(page, "Recorded: "+id+" edited by bob") || !strings.Contains(page, proposals.ReceiptProjected) {
		t.Fatalf("edit through the page = %d:\n%s", code, page)
	}
	j, err := st.LatestJudgment(context.Background(), proposals.OutputID(workflows.TurnWorkflowID(conv, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if j.Replacement != "Canberra.\nReally. " || j.Actor != "bob" || j.Kind != "correct" {
		t.Fatalf("judgment: %+v", j)
	}
	if _, page = do("POST", "/proposals/decide", edit); !strings.Contains(page, "Converged: the same decision (edited)") {
		t.Fatalf("the same edit again:\n%s", page)
	}
	reject := url.Values{"csrf": {m[1]}, "proposal_id": {id}, "disposition": {"reject"}}
	if _, page = do("POST", "/proposals/decide", reject); !strings.Contains(page, "Conflict: "+id+" already has another decision (edit by bob") {
		t.Fatalf("a different decision afterwards:\n%s", page)
	}
	d, err := st.GetProposalDecision(context.Background(), id)
	if err != nil || d.Disposition != proposals.Edit {
		t.Fatalf("stored decision: %+v %v", d, err)
	}
	// The CLI decides through the same proposals.Submit: the same edit from a file (bob's own
	// credential) converges with the page's; its reject conflicts.
	cli := func(args ...string) (string, error) {
		cmd := exec.Command(airlockBin, append([]string{"proposals", "decide", id, "--credential", itCredentials["bob"]}, args...)...)
		cmd.Env = append(os.Environ(), "AIRLOCK_HOME="+cfg.Home, "AIRLOCK_DATABASE_URL="+cfg.DatabaseURL, "AIRLOCK_APPROVERS="+cfg.ApproversFile,
			"TEMPORAL_ADDRESS="+devServer.Address, "TEMPORAL_NAMESPACE="+devServer.Namespace, "AIRLOCK_TASK_QUEUE="+cfg.TaskQueue)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	file := filepath.Join(t.TempDir(), "edit.txt")
	if err := os.WriteFile(file, []byte("Canberra.\nReally. "), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := cli("--edit-file", file); err != nil || !strings.Contains(out, "already recorded") || !strings.Contains(out, proposals.ReceiptProjected) {
		t.Fatalf("CLI same edit: %v\n%s", err, out)
	}
	if out, err := cli("--reject"); err == nil || !strings.Contains(out, "already has another decision") {
		t.Fatalf("CLI reject after the page's edit: %v\n%s", err, out)
	}
	if js, _ := st.ListJudgments(context.Background()); len(js) != 1 {
		t.Fatalf("judgments: %d, want 1", len(js))
	}
}
