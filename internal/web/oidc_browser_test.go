package web

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/identity"
	"github.com/airlock-dev/airlock/internal/identity/oidctest"
	"github.com/airlock-dev/airlock/internal/store"
)

// OIDC sign-in through the page in a real Chromium against a real OpenID Provider (zitadel's,
// in-process; issue 33, items 1 and 6): alice clicks "Sign in with Corp SSO", signs in on the
// provider's own login page and lands on the inbox as alice; the approvers file the workers
// read now lists her with the provider's subject and the mapped group (payments). The provider
// moves her out of the group: at the next check the file drops it. The provider removes her:
// at the next check her account and session end. bob, whom the approvers file lists as a file
// approver not bound to the provider's bob, is refused: one name never means two people.
func TestBrowserSignsInThroughTheIdentityProvider(t *testing.T) {
	path := chromium(t)
	ctx := context.Background()
	dir := t.TempDir()
	apPath := filepath.Join(dir, "approvers.json")
	if err := approvers.Add(apPath, approvers.Approver{Name: "bob", Groups: []string{"payments"}}); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pageURL := "http://" + l.Addr().String()
	op := oidctest.Start(t, []string{"airlock-page"}, pageURL+"/oidc/callback")
	op.SetGroups("u-alice", "Airlock-Payments", "All-Staff")
	op.SetGroups("u-bob", "Airlock-Payments")
	rp, err := identity.New(ctx, identity.Config{Issuer: op.Issuer, ClientID: "airlock-page", ClientSecret: "secret-airlock-page",
		RedirectURL: pageURL + "/oidc/callback", GroupMap: map[string]string{"Airlock-Payments": "payments"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, "sqlite:"+filepath.Join(dir, "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rec := &recorder{}
	src := approvers.NewSource(apPath)
	s, err := New(Options{Store: st, Approvers: FileApprovers(src), Decide: rec.decide, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OIDC: &OIDCOptions{RP: rp, ApproversPath: apPath, Recheck: time.Hour, Label: "Corp SSO"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: s}}
	srv.Start()
	t.Cleanup(srv.Close)

	actx, cancelA := chromedp.NewExecAllocator(ctx, chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true))
	defer cancelA()
	c := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	signIn := func(bctx context.Context, user string) {
		t.Helper()
		if err := chromedp.Do(bctx,
			chromedp.Navigate(pageURL+"/"),
			chromedp.WaitVisible(c(`#oidc-login`)),
			chromedp.Click(c(`#oidc-login`)),
			chromedp.WaitVisible(c(`input#username`)),
			chromedp.SendKeys(c(`input#username`), user),
			chromedp.SendKeys(c(`input#password`), oidctest.Password),
			chromedp.Click(c(`button[type=submit]`)),
		); err != nil {
			t.Fatal(err)
		}
	}
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	bctx, cancelT := context.WithTimeout(bctx, time.Minute)
	defer cancelT()
	signIn(bctx, "alice")
	if err := chromedp.Do(bctx, chromedp.WaitVisible(c(`#me`))); err != nil {
		t.Fatal(err)
	}
	me, err := chromedp.Run(bctx, chromedp.Text(c(`#me`)))
	if err != nil || me != "alice" {
		t.Fatalf("signed in as %q, %v", me, err)
	}
	set, err := src.Current()
	if err != nil {
		t.Fatal(err)
	}
	if !set.Has("alice") || !set.Eligible("alice", []string{"payments"}) || set.SubjectOf("alice") != op.Issuer+"#u-alice" {
		t.Fatalf("the approvers file after alice's sign-in: has %v, payments %v, subject %q", set.Has("alice"), set.Eligible("alice", []string{"payments"}), set.SubjectOf("alice"))
	}

	// The provider takes alice out of the payments group: the next check drops it.
	op.SetGroups("u-alice", "All-Staff")
	s.RecheckIdentities(ctx, true)
	if set, _ = src.Current(); !set.Has("alice") || set.Eligible("alice", []string{"payments"}) {
		t.Fatalf("after the provider's group change: has %v, payments %v", set.Has("alice"), set.Eligible("alice", []string{"payments"}))
	}
	// The provider removes alice: the next check removes her account and ends her session.
	op.RemoveUser("u-alice")
	s.RecheckIdentities(ctx, true)
	if set, _ = src.Current(); set.Has("alice") {
		t.Fatal("alice is still an approver after the provider removed her")
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(pageURL+"/"), chromedp.WaitVisible(c(`#oidc-login`))); err != nil {
		t.Fatalf("alice's session outlived her removal at the provider: %v", err)
	}

	// bob at the provider is not the approvers file's bob.
	b2, cancel2 := chromedp.NewContext(bctx) // a new tab
	defer cancel2()
	b2, cancelT2 := context.WithTimeout(b2, time.Minute)
	defer cancelT2()
	signIn(b2, "bob")
	if err := chromedp.Do(b2, chromedp.WaitVisible(c(`#login-error`))); err != nil {
		t.Fatal(err)
	}
	msg, _ := chromedp.Run(b2, chromedp.Text(c(`#login-error`)))
	if !strings.Contains(msg, "belongs to another approver") {
		t.Fatalf("bob's refusal says %q", msg)
	}
	if set, _ = src.Current(); set.SubjectOf("bob") != "" {
		t.Fatal("the provider's bob was bound to the file's bob")
	}
}
