//go:build cluster

package integration

// The Temporal UI and the codec server, in headless Chromium. Run by `make test-cluster`, which
// builds the Temporal UI server (bin/temporal-ui-server) this test starts.

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/internal/codec"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/stack"
	"github.com/airlock-dev/airlock/workflows"
)

// A turn run with encrypted payloads shows its user message decoded in a Temporal UI that
// uses the codec server (after the operator signed in there with the token), and only
// ciphertext in a UI without it.
func TestTemporalUIDecodesThroughCodecServer(t *testing.T) {
	browserPath(t)
	uiBin := filepath.Join(repoRoot, "bin", stack.UIServerBinary)
	if _, err := os.Stat(uiBin); err != nil {
		t.Fatalf("%s missing: run make cluster-bin", uiBin)
	}
	const marker = "zq7-ui-marker"
	model := newFakeModel(t, calls(call("call_1", "system_health", "{}")))
	cfg := testConfig(t)
	k, _ := codec.NewKey("k-ui")
	ring := filepath.Join(cfg.Home, "payload.keys")
	if err := os.WriteFile(ring, []byte(k.Line()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	startWorkerProcess(t, []string{
		"TEMPORAL_ADDRESS=" + devServer.Address, "TEMPORAL_NAMESPACE=" + devServer.Namespace,
		"AIRLOCK_HOME=" + cfg.Home, "AIRLOCK_DATABASE_URL=" + cfg.DatabaseURL, "AIRLOCK_TASK_QUEUE=" + cfg.TaskQueue,
		"AIRLOCK_OPENAI_BASE_URL=" + model.URL + "/v1", "AIRLOCK_OPENAI_API_KEY=test", "AIRLOCK_OPENAI_MODEL=fake",
		"AIRLOCK_REGISTRY_LAYERS=", "AIRLOCK_APPROVER_KEY=", "AIRLOCK_APPROVER_KEY_FILE=", "AIRLOCK_PAYLOAD_KEYS_FILE=" + ring,
	})
	cd, _ := codec.New([]codec.Key{k})
	o := client.Options{HostPort: devServer.Address, Namespace: devServer.Namespace, Logger: quietLogger(), DataConverter: codec.DataConverter(cd), Interceptors: signing()}
	config.TuneForLoopback(&o)
	c, err := client.Dial(o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "ui", Principal: "user", Message: "how is the host? " + marker})
	result(t, run)

	withPort, _ := stack.FreePort()
	withoutPort, _ := stack.FreePort()
	uiOrigin := fmt.Sprintf("http://127.0.0.1:%d", withPort)
	const token = "ui-codec-token-0123456789"
	cs := httptest.NewServer(codec.Handler(cd, token, []string{uiOrigin}))
	defer cs.Close()
	startUI(t, uiBin, withPort, cs.URL)
	startUI(t, uiBin, withoutPort, "")

	b := newTab(t)
	b.do("sign in to the codec server", chromedp.Navigate(cs.URL+"/login"), chromedp.WaitVisible(css(`#token`)),
		chromedp.SendKeys(css(`#token`), token), chromedp.Click(css(`#signin`)), chromedp.WaitVisible(css(`#status`)))
	if s := b.text(`#status`); !strings.Contains(s, "Signed in") {
		t.Fatalf("codec sign-in: %s", s)
	}
	page := func(port int) string {
		return fmt.Sprintf("http://127.0.0.1:%d/namespaces/%s/workflows/%s/%s/history", port, devServer.Namespace,
			url.PathEscape(run.GetID()), run.GetRunID())
	}
	bodyHas := func(what string) bool {
		return strings.Contains(evalAs[string](b, `document.body ? document.body.innerText : ""`), what)
	}
	b.do("open the turn in the UI with the codec server", chromedp.Navigate(page(withPort)))
	eventuallyFor(t, 90*time.Second, "the decoded user message in the UI", func() bool { return bodyHas(marker) }, func() string {
		return evalAs[string](b, `document.body ? document.body.innerText : ""`)
	})

	b.do("open the turn in the UI without it", chromedp.Navigate(page(withoutPort)))
	// The UI shows an undecodable payload as it is: its metadata base64-encoded.
	encrypted := base64.StdEncoding.EncodeToString([]byte(codec.Encoding))
	eventuallyFor(t, 90*time.Second, "the encrypted payload in the UI", func() bool { return bodyHas(encrypted) },
		func() string { return evalAs[string](b, `document.body ? document.body.innerText : ""`) })
	if bodyHas(marker) {
		t.Fatal("the UI without the codec server shows the plaintext message")
	}
}

// startUI runs the Temporal UI server on port against the test's dev server, with codecURL
// as its codec server ("" for none), until the test ends.
func startUI(t *testing.T, bin string, port int, codecURL string) {
	t.Helper()
	dir := t.TempDir()
	conf := fmt.Sprintf("temporalGrpcAddress: %q\nhost: 127.0.0.1\nport: %d\nenableUi: true\ndefaultNamespace: %s\n"+
		"notifyOnNewVersion: false\ncors:\n  cookieInsecure: true\n  allowOrigins:\n    - \"http://127.0.0.1:%d\"\n",
		devServer.Address, port, devServer.Namespace, port)
	if codecURL != "" {
		conf += fmt.Sprintf("codec:\n  endpoint: %q\n  includeCredentials: true\n", codecURL)
	}
	if err := os.WriteFile(filepath.Join(dir, "ui.yaml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--root", dir, "--config", ".", "--env", "ui", "start")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready := stack.HTTPReady(fmt.Sprintf("http://127.0.0.1:%d/", port))
	eventuallyFor(t, 30*time.Second, "the Temporal UI", func() bool { return ready(context.Background()) == nil }, out.String)
}

// eventuallyFor is eventually with a description of the state on failure.
func eventuallyFor(t *testing.T, d time.Duration, what string, cond func() bool, state func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s:\n%s", d, what, state())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
