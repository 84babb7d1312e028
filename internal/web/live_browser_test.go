package web

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/airlock-dev/airlock/internal/store"
)

// liveStore opens a fresh store of driver: a SQLite file, or a fresh schema of
// AIRLOCK_TEST_DATABASE_URL (skipped when it is unset).
func liveStore(t testing.TB, driver string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), liveURL(t, driver))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// liveURL is the URL of a fresh, empty database of driver (see liveStore).
func liveURL(t testing.TB, driver string) string {
	t.Helper()
	u := "sqlite:" + filepath.Join(t.TempDir(), "airlock.db")
	if driver == store.DriverPostgres {
		base := os.Getenv("AIRLOCK_TEST_DATABASE_URL")
		if base == "" {
			t.Skip("AIRLOCK_TEST_DATABASE_URL unset: the PostgreSQL live inbox is not tested")
		}
		var rnd [6]byte
		_, _ = rand.Read(rnd[:])
		schema := "airlock_web_" + hex.EncodeToString(rnd[:])
		admin, err := sql.Open("postgres", base)
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if db, err := sql.Open("postgres", base); err == nil {
				_, _ = db.Exec("DROP SCHEMA " + schema + " CASCADE")
				db.Close()
			}
		})
		pu, _ := url.Parse(base)
		q := pu.Query()
		q.Set("search_path", schema)
		pu.RawQuery = q.Encode()
		u = pu.String()
	}
	return u
}

// liveInbox is a signed-in headless Chromium on the inbox of a server over st, with a
// MutationObserver that records when each card first and last appeared (Date.now(), the same
// clock as the test's) and a marker that a reload would erase.
type liveInbox struct {
	ctx context.Context
	st  *store.Store
}

func openLiveInbox(t testing.TB, st *store.Store) *liveInbox {
	t.Helper()
	path := ""
	if tt, ok := t.(*testing.T); ok {
		path = chromium(tt)
	} else if p, err := lookChromium(); err == nil {
		path = p
	} else {
		t.Skip("no chromium")
	}
	s, err := New(Options{Store: st, Approvers: func() (Authenticator, error) { return users{"alice": "correct horse"}, nil },
		Decide: (&recorder{}).decide, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true))
	t.Cleanup(cancelA)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancelT)
	c := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(c(`input[name=name]`)),
		chromedp.SendKeys(c(`input[name=name]`), "alice"),
		chromedp.SendKeys(c(`input[name=password]`), "correct horse"),
		chromedp.Click(c(`form.login button`)),
		chromedp.WaitVisible(c(`#me`)),
	); err != nil {
		t.Fatal(err)
	}
	const observe = `window.__noReload = true; window.__seen = {}; window.__gone = {};
new MutationObserver(function () {
  var now = Date.now(), here = {};
  document.querySelectorAll('section.card[id]').forEach(function (c) { here[c.id] = true; if (!window.__seen[c.id]) window.__seen[c.id] = now; });
  Object.keys(window.__seen).forEach(function (id) { if (!here[id] && !window.__gone[id]) window.__gone[id] = now; });
}).observe(document.body, {childList: true, subtree: true}); true`
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](observe)); err != nil {
		t.Fatal(err)
	}
	return &liveInbox{ctx: ctx, st: st}
}

func lookChromium() (string, error) {
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}

func (l *liveInbox) issue(t testing.TB, id, wf string) time.Time {
	t.Helper()
	at := time.Now()
	_, err := l.st.CreateConfirmation(context.Background(), store.Confirmation{ID: id, TokenHash: []byte("h-" + id), WorkflowID: wf, RunID: "r",
		Seq: 1, CallID: "call-" + id, CapabilityID: "test.cap", Version: 1, ArgsDigest: "sha256:" + id, Arguments: json.RawMessage(`{"n":1}`),
		Display: "pay", CreatedAt: at, ExpiresAt: at.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// when polls until the observer saw id in set ("__seen" or "__gone") and returns the time.
func (l *liveInbox) when(t testing.TB, set, id string) time.Time {
	t.Helper()
	ms, err := chromedp.Run(l.ctx, chromedp.Poll[float64](fmt.Sprintf(`window.__noReload === true && window.__%s[%q]`, set, id), chromedp.WithPollingInterval(20*time.Millisecond)))
	if err != nil {
		t.Fatalf("card %s never %s without a reload: %v", id, map[string]string{"seen": "appeared", "gone": "went"}[set], err)
	}
	return time.UnixMilli(int64(ms))
}

// TestLiveInboxAddsAndRemovesCardsWithoutReload: on both stores (SQLite polls, PostgreSQL
// LISTEN/NOTIFY), a confirmation issued while the inbox is open appears as a card, and goes when
// it is decided, with no reload of the page.
func TestLiveInboxAddsAndRemovesCardsWithoutReload(t *testing.T) {
	for _, driver := range []string{store.DriverSQLite, store.DriverPostgres} {
		t.Run(driver, func(t *testing.T) {
			st := liveStore(t, driver)
			l := openLiveInbox(t, st)
			l.issue(t, "cf-live-1", "turn/live/1")
			l.when(t, "seen", "cf-live-1")
			l.issue(t, "cf-live-2", "turn/live/2")
			l.when(t, "seen", "cf-live-2")
			if err := st.DecideConfirmation(context.Background(), "cf-live-1", store.DecisionApproved, "bob", "", time.Now()); err != nil {
				t.Fatal(err)
			}
			l.when(t, "gone", "cf-live-1")
			still, err := chromedp.Run(l.ctx, chromedp.Evaluate[bool](`!!document.getElementById('cf-live-2') && !document.getElementById('cf-live-1') && window.__noReload === true`))
			if err != nil || !still {
				t.Fatalf("after the decision: card 2 shown and card 1 gone without reload = %v (%v)", still, err)
			}
		})
	}
}

// BenchmarkLiveInboxCardLatency measures, with 100 turns already waiting, the time from
// issuing a confirmation (the store write IssueConfirmation makes) to its card visible in a
// headless Chromium's open inbox, and reports the p50 and p95 (issue 23's target: p95 < 1 s).
// go test ./internal/web/ -run '^$' -bench LiveInbox -benchtime 20x
func BenchmarkLiveInboxCardLatency(b *testing.B) {
	for _, driver := range []string{store.DriverSQLite, store.DriverPostgres} {
		b.Run(driver, func(b *testing.B) {
			st := liveStore(b, driver)
			for i := range 100 {
				at := time.Now()
				if _, err := st.CreateConfirmation(context.Background(), store.Confirmation{ID: fmt.Sprintf("cf-wait-%03d", i), TokenHash: []byte(fmt.Sprintf("hw-%d", i)),
					WorkflowID: fmt.Sprintf("turn/wait/%d", i), RunID: "r", Seq: 1, CallID: "c", CapabilityID: "test.cap", Version: 1, ArgsDigest: "sha256:x",
					Arguments: json.RawMessage(`{"n":1}`), Display: "pay", CreatedAt: at, ExpiresAt: at.Add(time.Hour)}); err != nil {
					b.Fatal(err)
				}
			}
			l := openLiveInbox(b, st)
			time.Sleep(500 * time.Millisecond)
			var lat []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				id := fmt.Sprintf("cf-bench-%04d", i)
				at := l.issue(b, id, fmt.Sprintf("turn/bench/%d", i))
				seen := l.when(b, "seen", id)
				lat = append(lat, seen.Sub(at))
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			p := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
			b.ReportMetric(float64(p(0.5).Milliseconds()), "p50-ms")
			b.ReportMetric(float64(p(0.95).Milliseconds()), "p95-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}
