package mcp

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/registry"
)

// restartable is a streamable HTTP MCP server on the official Go SDK on a fixed port that a
// test restarts: the process's sessions are lost (a new handler), its connections cut (GET
// streams too), and it may come back with a different tool list. Without a GET stream it
// answers GET with 405, as the specification allows, so nothing tells a client its session
// went until its next request.
type restartable struct {
	t    *testing.T
	addr string
	dir  string
	get  bool
	// keepAlive off: the server closes each connection after its answer, so a request after
	// a restart never goes out on a pooled connection the old process had closed (written,
	// then EOF: an honest outcome_unknown, TestRetriedPostThatRanIsOutcomeUnknown's case),
	// as with a real restart that takes longer than the client needs to see the close.
	keepAlive bool
	ts        *httptest.Server
	gone      atomic.Int32 // requests answered 404 (unknown session)
}

func newRestartable(t *testing.T, dir string, get, keepAlive bool) *restartable {
	r := &restartable{t: t, dir: dir, get: get, keepAlive: keepAlive}
	r.start("v1", "127.0.0.1:0")
	r.addr = r.ts.Listener.Addr().String()
	t.Cleanup(func() { r.ts.Close() })
	return r
}

func (r *restartable) URL() string { return "http://" + r.addr }

func (r *restartable) start(variant, addr string) {
	srv := newTestServer(variant, r.dir)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet && !r.get {
			http.Error(w, "no standalone stream", http.StatusMethodNotAllowed)
			return
		}
		rec := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(rec, req)
		if rec.status == http.StatusNotFound {
			r.gone.Add(1)
		}
	}))
	ts.Config.SetKeepAlivesEnabled(r.keepAlive)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		r.t.Fatal(err)
	}
	ts.Listener = l
	ts.Start()
	r.ts = ts
}

// restart stops the server (every connection cut) and starts variant on the same port.
func (r *restartable) restart(variant string) {
	r.ts.CloseClientConnections()
	r.ts.Close()
	r.start(variant, r.addr)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func notes(t *testing.T, dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, "notes"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// Issue 38 item 1: a server that restarted no longer knows the bridge's session. With and
// without a GET stream, with verify/max-age off (a listing before each call) and on (the
// call's own POST meets the 404): the bridge opens a new session, lists the tools, checks the
// pin and serves the call, exactly once, never mcp_server_down or outcome_unknown. A restart
// that changes write_note: the call is refused by the pin (mcp_definition_changed) and does
// not run.
func TestRestartedServerSessionIsReopened(t *testing.T) {
	for _, get := range []bool{false, true} {
		for _, maxAge := range []string{"", "1h"} {
			name := "no-get-stream"
			if get {
				name = "get-stream"
			}
			if maxAge == "" {
				name += "/verify-every-call"
			} else {
				name += "/max-age-1h"
			}
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				// A call first on the old session (verify/max-age on) meets the restart on its
				// own POST; a listing first (off) is read-only and may go out on a pooled
				// connection the old process closed.
				srv := newRestartable(t, dir, get, maxAge == "")
				c := ServerConfig{Name: "notes", URL: srv.URL(), Refresh: "1h", VerifyMaxAge: maxAge, ConnectTimeout: "2s"}
				reg, b, _ := bound(t, c, ImportOptions{})
				wn := capability(t, reg, "write_note")
				ctx := context.Background()
				if out, err := invoke(t, ctx, wn, `{"text":"before"}`); err != nil || out.Error != "" {
					t.Fatalf("before the restart: %v %q", err, out.Error)
				}
				for i, text := range []string{"after1", "after2"} {
					srv.restart("v1")
					out, err := invoke(t, ctx, wn, `{"text":"`+text+`"}`)
					if err != nil || out.Error != "" {
						t.Fatalf("restart %d: the call was not served: %v %q", i+1, err, out.Error)
					}
				}
				if got := notes(t, dir); strings.Join(got, ",") != "before,after1,after2" {
					t.Fatalf("notes %q: each call must run exactly once", got)
				}
				if !get && srv.gone.Load() == 0 {
					t.Fatal("the server never answered 404: the test did not exercise a forgotten session")
				}
				if st := b.Status(ctx, false); len(st) != 1 || !st[0].Connected {
					t.Fatalf("status after the restarts: %+v", st)
				}

				// A restart that changes write_note's description: refused by the pin, not run.
				srv.restart("v2")
				_, err := invoke(t, ctx, wn, `{"text":"must not land"}`)
				var nr *registry.NotRunError
				if !errors.As(err, &nr) || nr.Code != ReasonDefinitionChanged || errors.Is(err, registry.ErrOutcomeUnknown) {
					t.Fatalf("after a restart that changed the tool: %v, want %s", err, ReasonDefinitionChanged)
				}
				if got := notes(t, dir); len(got) != 3 {
					t.Fatalf("notes %q: the changed tool ran", got)
				}
				// The server's other tools still work on the new session.
				if out, err := invoke(t, ctx, capability(t, reg, "echo"), `{"message":"still"}`); err != nil || out.Error != "" {
					t.Fatalf("echo after the changing restart: %v %q", err, out.Error)
				}
			})
		}
	}
}

// unknownSession reads a 404, and a 404 or 400 whose JSON-RPC error speaks of the session, as
// the specification's 404; a method-not-found or invalid-params error and every other answer
// stay as they came.
func TestUnknownSessionResponses(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		gone   bool
	}{
		{404, "session not found", true},
		{404, `{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}`, true},
		{400, `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"}}`, true},
		{400, `{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}`, false},
		{400, "bad request", false},
		{200, `{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":1}`, false},
		{404, `{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":2}`, false},
		{400, `{"jsonrpc":"2.0","error":{"code":-32602,"message":"invalid params: session_id is required"},"id":3}`, false},
		{500, "session not found", false},
	} {
		resp := &http.Response{StatusCode: tc.status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(tc.body))}
		got := unknownSession(resp)
		b, _ := io.ReadAll(got.Body)
		if gone := got.StatusCode == http.StatusNotFound && string(b) == "session not found"; gone != tc.gone {
			t.Errorf("%d %s: read as unknown session %v, want %v", tc.status, tc.body, gone, tc.gone)
		}
		if !tc.gone && (got.StatusCode != tc.status || string(b) != tc.body) {
			t.Errorf("%d %s: changed to %d %s", tc.status, tc.body, got.StatusCode, b)
		}
	}
}
