package web

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/store"
)

// grouped is an Authenticator with approver groups (as approvers.Set offers them).
type grouped struct {
	users
	groups map[string][]string
}

func (g grouped) GroupsOf(name string) []string { return g.groups[name] }

// The inbox lists a signed-in approver only what their groups may decide (issue 21): carol, in
// no group, sees the confirmation every approver may decide and not the payments one; alice,
// in payments, sees both; the counts agree.
func TestInboxListsOnlyWhatTheApproverMayDecide(t *testing.T) {
	e := newEnvWith(t, grouped{users: users{"alice": "correct horse", "carol": "correct horse"}, groups: map[string][]string{"alice": {"payments"}}})
	for _, c := range []store.Confirmation{
		{ID: "cf-open", TokenHash: []byte("h-open"), WorkflowID: "turn/c/1", RunID: "r", Seq: 1, CapabilityID: "web.fetch", Version: 1,
			ArgsDigest: "d", Arguments: []byte(`{"url":"https://example.org"}`), Display: "web_fetch {}", ExpiresAt: time.Now().Add(time.Hour)},
		{ID: "cf-pay", TokenHash: []byte("h-pay"), WorkflowID: "turn/c/1", RunID: "r", Seq: 2, CapabilityID: "bank.send", Version: 1,
			ArgsDigest: "d", Arguments: []byte(`{"to":"x"}`), Display: "send_money {}", ExpiresAt: time.Now().Add(time.Hour), ApproverGroups: []string{"payments"}},
	} {
		if _, err := e.st.CreateConfirmation(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string][]string{"carol": {"cf-open"}, "alice": {"cf-open", "cf-pay"}} {
		b := e.browser()
		b.login(name, "correct horse")
		_, page := b.get("/")
		for _, id := range []string{"cf-open", "cf-pay"} {
			shown := strings.Contains(page, `data-confirmation="`+id+`"`)
			if shown != (id == want[0] || (len(want) > 1 && id == want[1])) {
				t.Errorf("%s: %s shown = %v", name, id, shown)
			}
		}
	}
}

// The page answers only its configured host names (issue 21, item 4): a request for another
// Host (a DNS-rebinding page) is refused 421 before any handler, sign-in included; the
// configured names answer with or without port and in any case.
func TestPageAnswersOnlyItsHostNames(t *testing.T) {
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := New(Options{Store: st, Approvers: func() (Authenticator, error) { return users{"alice": "correct horse"}, nil },
		Decide: (&recorder{}).decide, WorkflowURL: func(string) string { return "" }, Hosts: DefaultHosts("approvals.example:8780"),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]int{"approvals.example:8780": http.StatusOK, "APPROVALS.example": http.StatusOK,
		"127.0.0.1:8780": http.StatusOK, "[::1]:8780": http.StatusOK, "localhost": http.StatusOK,
		"evil.example": http.StatusMisdirectedRequest, "approvals.example.evil.example:8780": http.StatusMisdirectedRequest, "": http.StatusMisdirectedRequest} {
		req := httptest.NewRequest("GET", "/login", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Host %q: %d, want %d", host, rec.Code, want)
		}
	}
	if got := DefaultHosts("0.0.0.0:8780"); strings.Join(got, " ") != "localhost 127.0.0.1 ::1" {
		t.Errorf("DefaultHosts of a wildcard address = %v", got)
	}
}

// stamped is an Authenticator whose password stamps the test changes (a password change).
type stamped struct {
	users
	mu    *sync.Mutex
	stamp map[string]string
}

func (s stamped) PasswordStamp(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stamp[name]
}

// A password change ends the sessions signed in with the old password (issue 21, item 4):
// the next request goes to the sign-in page; a new sign-in works.
func TestPasswordChangeEndsSessions(t *testing.T) {
	auth := stamped{users: users{"alice": "correct horse"}, mu: &sync.Mutex{}, stamp: map[string]string{"alice": "v1"}}
	e := newEnvWith(t, auth)
	b := e.browser()
	b.login("alice", "correct horse")
	if resp, _ := b.get("/"); resp.StatusCode != http.StatusOK {
		t.Fatalf("signed in: %d", resp.StatusCode)
	}
	auth.mu.Lock()
	auth.stamp["alice"] = "v2"
	auth.mu.Unlock()
	if resp, _ := b.get("/"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("after a password change: %d %s, want a redirect to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
	b.login("alice", "correct horse")
	if resp, _ := b.get("/"); resp.StatusCode != http.StatusOK {
		t.Fatalf("signed in again: %d", resp.StatusCode)
	}
}
