package web

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium finds the browser, or skips when none is installed and AIRLOCK_REQUIRE_BROWSER is
// unset.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("AIRLOCK_REQUIRE_BROWSER") != "" {
		t.Fatal("AIRLOCK_REQUIRE_BROWSER is set but no chromium is installed: apt-get install -y chromium")
	}
	t.Skip("browser test skipped: chromium is not installed (apt-get install -y chromium; AIRLOCK_REQUIRE_BROWSER=1 makes this a failure)")
	return ""
}

// TestBrowserKeepsTheSecureSessionOnLoopback: a real Chromium signs in over plain HTTP on
// 127.0.0.1 and keeps the Secure, __Host- prefixed session cookie (browsers treat loopback as
// a secure context), which script on the page cannot read (HttpOnly); the page's script runs
// under the CSP (the countdown ticks) while no inline script is allowed.
func TestBrowserKeepsTheSecureSessionOnLoopback(t *testing.T) {
	path := chromium(t)
	e := newEnv(t)
	e.confirmation("cf-br", "turn/c/1", "pay", `{"amount":5}`, time.Hour)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true))
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, time.Minute)
	defer cancelT()
	c := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/"),
		chromedp.WaitVisible(c(`input[name=name]`)),
		chromedp.SendKeys(c(`input[name=name]`), "alice"),
		chromedp.SendKeys(c(`input[name=password]`), "correct horse"),
		chromedp.Click(c(`form.login button`)),
		chromedp.WaitVisible(c(`#me`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	me, err := chromedp.Run(ctx, chromedp.Text(c(`#me`)))
	if err != nil {
		t.Fatal(err)
	}
	cookies, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('time.countdown').textContent.endsWith('s left')`)); err != nil {
		t.Fatal(err)
	}
	countdown, err := chromedp.Run(ctx, chromedp.Text(c(`time.countdown`)))
	if err != nil {
		t.Fatal(err)
	}
	if me != "alice" || cookies != "" || !strings.HasSuffix(countdown, "s left") {
		t.Fatalf("signed in as %q, document.cookie %q, countdown %q", me, cookies, countdown)
	}
}
