package web

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/store"
)

// changingPasswords is an approvers file whose passwords can change: name -> password, with a stamp
// that changes with each password (as approvers.Set's PasswordStamp does).
type changingPasswords struct {
	mu  sync.Mutex
	pw  map[string]string
	gen map[string]int
}

func (s *changingPasswords) Has(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.pw[name]
	return ok
}

func (s *changingPasswords) Authenticate(name, password string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.pw[name]; ok && p == password {
		return name, nil
	}
	return "", errBad
}

func (s *changingPasswords) PasswordStamp(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Repeat("x", s.gen[name]+1)
}

func (s *changingPasswords) setPassword(name, pw string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pw[name] = pw
	s.gen[name]++
}

func (s *changingPasswords) remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pw, name)
}

// clock is a settable clock shared by several page instances.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// instance is one approver page server over st (one `airlock web` process).
func instance(t *testing.T, st *store.Store, auth Authenticator, clk *clock) *env {
	t.Helper()
	e := &env{t: t, st: st, rec: &recorder{}, pr: &proposalRecorder{}, now: clk.now()}
	s, err := New(Options{Store: st, Approvers: func() (Authenticator, error) { return auth, nil }, Now: clk.now,
		Decide: e.rec.decide, DecideProposal: e.pr.decide, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(s)
	t.Cleanup(e.srv.Close)
	return e
}

// on is a browser for instance e carrying b's session cookie: the same approver reaching
// another instance behind the same address.
func (b *browser) on(e *env) *browser {
	o := e.browser()
	o.sid = b.sid
	return o
}

func isSignedIn(t *testing.T, b *browser, where string) bool {
	t.Helper()
	resp, page := b.get("/")
	switch {
	case resp.StatusCode == http.StatusOK && strings.Contains(page, `name="csrf"`):
		return true
	case resp.StatusCode == http.StatusSeeOther && resp.Header.Get("Location") == "/login":
		return false
	}
	t.Fatalf("%s: GET / = %d %q", where, resp.StatusCode, resp.Header.Get("Location"))
	return false
}

// Issue 21, item 4: page sessions live in the store. Two instances over one store share them
// (a session signed in on one is signed in on the other, its CSRF token valid on both, a
// sign-out on one ends it on both), a restarted instance keeps them, the store holds only the
// session id's hash, both lifetimes hold, and a password change or a removal ends exactly the
// sessions it must.
func TestPageSessionsLiveInTheStore(t *testing.T) {
	for _, driver := range []string{store.DriverSQLite, store.DriverPostgres} {
		t.Run(driver, func(t *testing.T) {
			dbURL := liveURL(t, driver)
			st, err := store.Open(context.Background(), dbURL)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			auth := &changingPasswords{pw: map[string]string{"alice": "correct horse", "bob": "battery staple"}, gen: map[string]int{}}
			clk := &clock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
			a, b := instance(t, st, auth, clk), instance(t, st, auth, clk)

			alice := a.browser()
			if resp := alice.login("alice", "correct horse"); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("sign in on instance A = %d", resp.StatusCode)
			}
			if alice.sid == "" {
				t.Fatal("no session cookie")
			}
			onB := alice.on(b)
			if !isSignedIn(t, onB, "instance B") {
				t.Fatal("a session signed in on instance A is not signed in on instance B")
			}
			csrfA := alice.csrf()
			if got := onB.csrf(); got != csrfA {
				t.Fatalf("instance B prints CSRF %q, instance A %q: one session, one token", got, csrfA)
			}

			// The store keeps the id's hash, never the cookie value.
			if _, err := st.GetPageSession(context.Background(), alice.sid); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the store answers the raw session id: %v (it must hold only its hash)", err)
			}
			row, err := st.GetPageSession(context.Background(), hashID(alice.sid))
			if err != nil || row.Approver != "alice" {
				t.Fatalf("stored session = %+v, %v", row, err)
			}

			// A restart (a new process over the same database) keeps the session.
			a.srv.Close()
			st2, err := store.Open(context.Background(), dbURL)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st2.Close() })
			a2 := instance(t, st2, auth, clk)
			if !isSignedIn(t, alice.on(a2), "restarted instance") {
				t.Fatal("a restart signed the approver out")
			}

			// Idle lifetime: a request every 20 minutes keeps the session alive (each one
			// refreshes it, on either instance) until SessionMax, then it ends.
			for elapsed := 20 * time.Minute; elapsed < SessionMax; elapsed += 20 * time.Minute {
				clk.add(20 * time.Minute)
				via := onB
				if elapsed%(40*time.Minute) == 0 {
					via = alice.on(a2)
				}
				if !isSignedIn(t, via, "within both lifetimes") {
					t.Fatalf("session ended %s after sign-in, before SessionMax (%s)", elapsed, SessionMax)
				}
			}
			clk.add(20 * time.Minute) // 12 h after sign-in, 20 min after the last request
			if isSignedIn(t, onB, "past SessionMax") {
				t.Fatal("a session outlived SessionMax")
			}
			if _, err := st.GetPageSession(context.Background(), hashID(alice.sid)); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("an expired session stays in the store: %v", err)
			}

			// Idle: SessionIdle without a request ends it.
			alice = a2.browser()
			alice.login("alice", "correct horse")
			clk.add(SessionIdle - time.Second)
			if !isSignedIn(t, alice.on(b), "just under SessionIdle") {
				t.Fatal("a session ended before SessionIdle")
			}
			clk.add(SessionIdle)
			if isSignedIn(t, alice, "past SessionIdle") {
				t.Fatal("a session outlived SessionIdle without a request")
			}

			// Sign-out on one instance ends the session on the other.
			alice = a2.browser()
			alice.login("alice", "correct horse")
			if resp, _ := alice.post("/logout", url.Values{"csrf": {alice.csrf()}}); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("sign out = %d", resp.StatusCode)
			}
			if isSignedIn(t, alice.on(b), "signed out on A") {
				t.Fatal("a session signed out on one instance lives on another")
			}

			// A password change ends the sessions signed in with the old password, on every
			// instance, and keeps one signed in with the new password.
			old1, old2 := a2.browser(), b.browser()
			old1.login("alice", "correct horse")
			old2.login("alice", "correct horse")
			bob := b.browser()
			bob.login("bob", "battery staple")
			auth.setPassword("alice", "new horse")
			fresh := b.browser()
			fresh.login("alice", "new horse")
			if isSignedIn(t, old1.on(b), "old password, instance B") {
				t.Fatal("a session signed in with the old password survived the change")
			}
			if _, err := st.GetPageSession(context.Background(), hashID(old2.sid)); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("the other session signed in with the old password was not ended with it: %v", err)
			}
			if !isSignedIn(t, fresh.on(a2), "new password") {
				t.Fatal("the session signed in with the new password was ended")
			}
			if !isSignedIn(t, bob, "another approver") {
				t.Fatal("alice's password change ended bob's session")
			}

			// Removal ends every session of the approver, and only theirs.
			other := a2.browser()
			other.login("alice", "new horse")
			auth.remove("alice")
			if isSignedIn(t, fresh, "removed approver") {
				t.Fatal("a removed approver's session still works")
			}
			if _, err := st.GetPageSession(context.Background(), hashID(other.sid)); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("a removed approver's other session stays in the store: %v", err)
			}
			if !isSignedIn(t, bob.on(a2), "bob after alice's removal") {
				t.Fatal("alice's removal ended bob's session")
			}
		})
	}
}
