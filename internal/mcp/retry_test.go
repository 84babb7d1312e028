package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/airlock-dev/airlock/registry"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRetriedPostThatRanIsOutcomeUnknown: the server runs write_note, then its
// connection drops before any answer byte and it stops listening. With an
// "Idempotency-Key" header configured (an operator's secret header), net/http treats the
// POST as replayable and retries it on a new connection, whose dial fails. The call ran, so
// it must be outcome_unknown, never "not sent" (server_down). Without the header (no retry)
// it is outcome_unknown too. (Found by an attack helper.)
func TestRetriedPostThatRanIsOutcomeUnknown(t *testing.T) {
	for _, withKey := range []bool{false, true} {
		dir := t.TempDir()
		h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return newTestServer("v1", dir) }, nil)
		var drop atomic.Bool
		var ts *httptest.Server
		ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if drop.Load() && bytes.Contains(body, []byte(`"tools/call"`)) {
				h.ServeHTTP(httptest.NewRecorder(), r) // the tool runs
				ts.Listener.Close()                    // and the server goes away
				c, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					c.Close() // before any byte of the answer
				}
				return
			}
			h.ServeHTTP(w, r)
		}))
		t.Cleanup(ts.Close)
		t.Setenv("ATTACK5_KEY", "k1")
		c := ServerConfig{Name: "notes", URL: ts.URL, Refresh: "1h", VerifyMaxAge: "1h", ConnectTimeout: "1s"}
		if withKey {
			c.Headers = []Header{{Name: "Idempotency-Key", Secret: Secret{Env: "ATTACK5_KEY"}}}
		}
		reg, _, _ := bound(t, c, ImportOptions{})
		wn := capability(t, reg, "write_note")
		if err := wn.Unavailable(); err != nil {
			t.Fatal(err)
		}
		drop.Store(true)
		_, err := wn.Impl.Invoke(context.Background(), registry.Invocation{Arguments: json.RawMessage(`{"text":"it ran"}`)})
		notes, _ := os.ReadFile(filepath.Join(dir, "notes"))
		var nr *registry.NotRunError
		t.Logf("withKey=%v notes=%q err=%v", withKey, notes, err)
		if !strings.Contains(string(notes), "it ran") {
			t.Fatalf("withKey=%v: the tool did not run; the test missed its case", withKey)
		}
		if errors.As(err, &nr) || !errors.Is(err, registry.ErrOutcomeUnknown) {
			t.Errorf("withKey=%v: a call that ran was reported %v, want outcome_unknown", withKey, err)
		}
	}
}
