package capabilities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/registry"
)

// seen is one request a test server received.
type seen struct {
	Method, RawPath, Query, Body string
	Header                       http.Header
}

// recorder is a real local HTTP server that records every request and answers with handle.
type recorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []seen
	port uint16
}

func newRecorder(t *testing.T, handle func(w http.ResponseWriter, r *http.Request)) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, seen{Method: r.Method, RawPath: r.URL.EscapedPath(), Query: r.URL.RawQuery, Body: string(b), Header: r.Header.Clone()})
		rec.mu.Unlock()
		handle(w, r)
	}))
	t.Cleanup(rec.srv.Close)
	ap := netip.MustParseAddrPort(rec.srv.Listener.Addr().String())
	rec.port = ap.Port()
	return rec
}

func (rec *recorder) requests() []seen {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]seen(nil), rec.reqs...)
}

// httpEntry is a registry document with one HTTP capability against base.
func httpEntry(sideEffect, network, timeout, httpBlock, fields string) string {
	return fmt.Sprintf(`{"schema/v":"capability-registry.v1","revision":"http-test","entries":[
 {"capability/id":"tickets.call","version":1,"owner":"tests","surfaces":["host-local"],"wire/name":"app/tickets.call","status":"active",
  "flags":{"dispatchable":true,"advertisable":false,"passport/eligible":false,"signing-domain":false,"host-route":true,"federated-discovery":false},
  "airlock":{"tool/name":"tickets_call","description":"Call the ticket server.","side-effect":%q,"network":%q,"per-turn/cap":5,"timeout":%q,"model-visible":true,
   "destination":{"kind":"host","name":"127.0.0.1","fields":%s},
   "http":%s}}]}`, sideEffect, network, timeout, fields, httpBlock)
}

// loadHTTP loads doc with its HTTP implementation bound on a fetcher whose allow-list opens
// only the recorder's port (allow false: none).
func loadHTTP(t *testing.T, doc string, rec *recorder, allow bool, secrets Secrets) (*registry.Capability, error) {
	t.Helper()
	cfg := FetchConfig{Timeout: 5 * time.Second}
	if allow {
		rules, err := ParseAllowList([]string{"127.0.0.1:" + strconv.Itoa(int(rec.port))})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Allow = rules
	}
	src := registry.Source{Name: "http-test", Data: []byte(doc)}
	entries, err := registry.Entries(src)
	if err != nil {
		t.Fatal(err)
	}
	impls, err := HTTPCapabilities(entries, NewFetcher(cfg), secrets)
	if err != nil {
		return nil, err
	}
	reg, err := registry.Load(registry.WithStructuralPolicy(src), impls)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := reg.ByKey("tickets.call@1")
	return c, nil
}

func call(t *testing.T, c *registry.Capability, args string) (registry.Output, error) {
	t.Helper()
	decoded, err := c.ValidateArguments(json.RawMessage(args))
	if err != nil {
		t.Fatalf("arguments %s refused: %v", args, err)
	}
	return c.Impl.Invoke(context.Background(), registry.Invocation{Arguments: json.RawMessage(args), Decoded: decoded, WorkflowID: "turn/c/1", Seq: 3})
}

const createBlock = `{"method":"POST","url":"%s/api/","path":"/projects/{project}/tickets","query":["labels"],"body":["title","priority"],
 "headers":[{"name":"Authorization","secret":"tickets-token","prefix":"Bearer "}],"accept/status":[201],"idempotency/header":"Idempotency-Key",
 "arguments":{"type":"object","additionalProperties":false,"required":["project","title"],"properties":{
  "project":{"type":"string","maxLength":64},"title":{"type":"string","maxLength":200},"priority":{"type":"integer"},
  "labels":{"type":"array","items":{"type":"string"}}}}}`

func staticSecrets(vals map[string]string) Secrets {
	return func(name string) (string, error) {
		if v, ok := vals[name]; ok {
			return v, nil
		}
		return "", fmt.Errorf("%w: %q", ErrSecretMissing, name)
	}
}

// A POST is built from the declaration alone: the slot escaped as one segment, the query and
// the JSON body from exactly the declared arguments, the header from the secret, the
// idempotency key from the proposal; the answer is data with its status and source URL, and
// a secret the server echoes never comes back.
func TestHTTPCapabilitySendsWhatTheRegistryDeclares(t *testing.T) {
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id": 42, "echo": %q}`, r.Header.Get("Authorization"))
	})
	doc := httpEntry("external-write", "external", "5s", fmt.Sprintf(createBlock, rec.srv.URL), `["labels","priority","project","title"]`)
	c, err := loadHTTP(t, doc, rec, true, staticSecrets(map[string]string{"tickets-token": "s3cr3t-value"}))
	if err != nil {
		t.Fatal(err)
	}
	out, err := call(t, c, `{"project":"ops/../adm in","title":"Disk full","priority":2,"labels":["a","b&c"]}`)
	if err != nil || out.Error != "" {
		t.Fatalf("call: %v %q", err, out.Error)
	}
	reqs := rec.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Method != "POST" || r.RawPath != "/api/projects/ops%2F..%2Fadm%20in/tickets" {
		t.Errorf("request %s %s, want the slot escaped as one segment", r.Method, r.RawPath)
	}
	if q, _ := url.ParseQuery(r.Query); len(q["labels"]) != 2 || q["labels"][1] != "b&c" || len(q) != 1 {
		t.Errorf("query %q, want labels twice and nothing else", r.Query)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(r.Body), &body); err != nil || len(body) != 2 || body["title"] != "Disk full" || body["priority"] != 2.0 {
		t.Errorf("body %s, want exactly title and priority", r.Body)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer s3cr3t-value" {
		t.Errorf("Authorization %q", got)
	}
	if got := r.Header.Get("Idempotency-Key"); got != IdempotencyKey("turn/c/1", 3) || !strings.HasPrefix(got, "airlock-") {
		t.Errorf("Idempotency-Key %q", got)
	}
	if IdempotencyKey("turn/c/1", 3) == IdempotencyKey("turn/c/1", 4) {
		t.Error("two proposals share an idempotency key")
	}
	var res HTTPResult
	if err := json.Unmarshal(out.Data, &res); err != nil || res.Status != 201 {
		t.Fatalf("data %s", out.Data)
	}
	if strings.Contains(string(out.Data), "s3cr3t-value") || !strings.Contains(string(res.Body), `"echo":"Bearer [secret]"`) {
		t.Errorf("the echoed secret came back: %s", out.Data)
	}
	if !strings.HasPrefix(out.SourceURL, rec.srv.URL+"/api/projects/") {
		t.Errorf("source URL %q", out.SourceURL)
	}
}

// Refusals before anything is sent: a path value that would change the path, an address
// outside the allow-list, and a secret that is missing (at load).
func TestHTTPCapabilityRefusesBeforeSending(t *testing.T) {
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201) })
	doc := httpEntry("external-write", "external", "5s", fmt.Sprintf(createBlock, rec.srv.URL), `["labels","priority","project","title"]`)
	secrets := staticSecrets(map[string]string{"tickets-token": "x"})
	c, err := loadHTTP(t, doc, rec, true, secrets)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"..", "."} {
		if _, err := call(t, c, `{"project":"`+p+`","title":"t"}`); !errors.Is(err, ErrPathValue) || !strings.Contains(err.Error(), "not sent") {
			t.Errorf("project %q: %v", p, err)
		}
	}
	blocked, err := loadHTTP(t, doc, rec, false, secrets)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, blocked, `{"project":"p","title":"t"}`); !errors.Is(err, ErrBlockedAddress) || errors.Is(err, registry.ErrOutcomeUnknown) {
		t.Errorf("loopback without an allow-list entry: %v", err)
	}
	if n := len(rec.requests()); n != 0 {
		t.Fatalf("%d requests reached the server", n)
	}
	if _, err := loadHTTP(t, doc, rec, true, SecretsFrom(t.TempDir())); !errors.Is(err, ErrSecretMissing) || !strings.Contains(err.Error(), "AIRLOCK_SECRET_TICKETS_TOKEN") {
		t.Errorf("missing secret: %v", err)
	}
}

// Airlock's own services are never reached, whatever the allow-list opens.
func TestHTTPCapabilityNeverReachesProtectedServices(t *testing.T) {
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	rules, _ := ParseAllowList([]string{"127.0.0.0/8"})
	prot, err := ResolveProtected(context.Background(), []Service{{Name: "Temporal", Host: "127.0.0.1", Port: rec.port}})
	if err != nil {
		t.Fatal(err)
	}
	doc := httpEntry("none", "external", "5s", fmt.Sprintf(`{"method":"GET","url":"%s"}`, rec.srv.URL), `[]`)
	src := registry.Source{Name: "p", Data: []byte(doc)}
	entries, _ := registry.Entries(src)
	impls, err := HTTPCapabilities(entries, NewFetcher(FetchConfig{Allow: rules, Protected: prot}), nil)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.Load(registry.WithStructuralPolicy(src), impls)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := reg.ByKey("tickets.call@1")
	if _, err := call(t, c, `{}`); !errors.Is(err, ErrProtectedAddress) {
		t.Fatalf("protected service: %v", err)
	}
	if len(rec.requests()) != 0 {
		t.Fatal("the protected service was reached")
	}
}

// Statuses outside accept/status, redirects (never followed), oversized answers, slow
// servers: each is an error the approver and the model can read, and a write whose answer
// never came is outcome unknown, not failed.
func TestHTTPCapabilityLimits(t *testing.T) {
	var target atomicCount
	other := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { target.add() })
	release := make(chan struct{})
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/missing":
			w.WriteHeader(404)
			io.WriteString(w, "no such ticket")
		case "/redirect":
			http.Redirect(w, r, other.srv.URL+"/x", http.StatusFound)
		case "/big":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `"`+strings.Repeat("a", 5000)+`"`)
		case "/slow":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	})
	defer close(release)
	block := func(method, path string) string {
		return fmt.Sprintf(`{"method":%q,"url":%q,"path":%q,"max/bytes":1000}`, method, rec.srv.URL, path)
	}
	load := func(se, method, path, timeout string) *registry.Capability {
		c, err := loadHTTP(t, httpEntry(se, "external", timeout, block(method, path), `[]`), rec, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	out, err := call(t, load("none", "GET", "/missing", "5s"), `{}`)
	if err != nil || !strings.Contains(out.Error, "404") || !strings.Contains(string(out.Data), `"no such ticket"`) {
		t.Errorf("404: %v %q %s", err, out.Error, out.Data)
	}
	out, err = call(t, load("none", "GET", "/redirect", "5s"), `{}`)
	if err != nil || !strings.Contains(out.Error, "302") || target.get() != 0 {
		t.Errorf("redirect: %v %q (target hit %d times)", err, out.Error, target.get())
	}
	if _, err = call(t, load("none", "GET", "/big", "5s"), `{}`); !errors.Is(err, ErrResponseTooLarge) {
		t.Errorf("oversized: %v", err)
	}
	start := time.Now()
	_, err = call(t, load("external-write", "POST", "/slow", "300ms"), `{}`)
	if !errors.Is(err, registry.ErrOutcomeUnknown) || time.Since(start) > 4*time.Second {
		t.Errorf("slow write: %v after %s, want outcome unknown at the timeout", err, time.Since(start))
	}
	if _, err = call(t, load("none", "GET", "/slow", "300ms"), `{}`); err == nil || !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
		t.Errorf("slow read: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

type atomicCount struct {
	mu sync.Mutex
	n  int
}

func (a *atomicCount) add() { a.mu.Lock(); a.n++; a.mu.Unlock() }
func (a *atomicCount) get() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

// A secret comes from the environment first, then the secrets folder; names that would
// leave the folder are never read.
func TestSecretsFromEnvironmentOrFolder(t *testing.T) {
	dir := t.TempDir()
	if err := writeFile(dir+"/tickets-token", "from-file\n"); err != nil {
		t.Fatal(err)
	}
	s := SecretsFrom(dir)
	if v, err := s("tickets-token"); err != nil || v != "from-file" {
		t.Errorf("file secret: %q %v", v, err)
	}
	t.Setenv("AIRLOCK_SECRET_TICKETS_TOKEN", "from-env")
	if v, err := s("tickets-token"); err != nil || v != "from-env" {
		t.Errorf("env secret: %q %v", v, err)
	}
	if _, err := s("../etc/passwd"); !errors.Is(err, ErrSecretMissing) {
		t.Errorf("path name: %v", err)
	}
}

// BenchmarkHTTPCapability measures one call of an HTTP capability (request built from the
// declaration, secret header, address check, JSON answer decoded) against the same request
// made directly with net/http, on a local server.
func BenchmarkHTTPCapability(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		io.WriteString(w, `{"id":42,"status":"open"}`)
	}))
	defer srv.Close()
	ap := netip.MustParseAddrPort(srv.Listener.Addr().String())
	rules, _ := ParseAllowList([]string{"127.0.0.1:" + strconv.Itoa(int(ap.Port()))})
	doc := httpEntry("external-write", "external", "5s", fmt.Sprintf(createBlock, srv.URL), `["labels","priority","project","title"]`)
	src := registry.Source{Name: "bench", Data: []byte(doc)}
	entries, _ := registry.Entries(src)
	impls, err := HTTPCapabilities(entries, NewFetcher(FetchConfig{Allow: rules}), staticSecrets(map[string]string{"tickets-token": "t"}))
	if err != nil {
		b.Fatal(err)
	}
	reg, err := registry.Load(registry.WithStructuralPolicy(src), impls)
	if err != nil {
		b.Fatal(err)
	}
	c, _ := reg.ByKey("tickets.call@1")
	args := json.RawMessage(`{"project":"ops","title":"Disk full","priority":2}`)
	b.Run("capability", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			out, err := c.Impl.Invoke(context.Background(), registry.Invocation{Arguments: args, WorkflowID: "turn/c/1", Seq: i})
			if err != nil || out.Error != "" {
				b.Fatal(err, out.Error)
			}
		}
	})
	// What the declaration adds on top of a hand-written request, without the network: the
	// request built from the declaration (path slots, query, body, headers, idempotency key)
	// and the answer turned into the result.
	entry := entries[0]
	hc, err := newHTTPCall(entry, entry.Airlock.HTTP, NewFetcher(FetchConfig{Allow: rules}), staticSecrets(map[string]string{"tickets-token": "t"}))
	if err != nil {
		b.Fatal(err)
	}
	answer := []byte(`{"id":42,"status":"open"}`)
	b.Run("overhead", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := hc.request(context.Background(), registry.Invocation{Arguments: args, WorkflowID: "turn/c/1", Seq: i}); err != nil {
				b.Fatal(err)
			}
			if _, err := json.Marshal(HTTPResult{Status: 201, ContentType: "application/json", Body: hc.bodyValue(answer, "application/json")}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("direct", func(b *testing.B) {
		client := &http.Client{}
		for i := 0; i < b.N; i++ {
			req, _ := http.NewRequest("POST", srv.URL+"/api/projects/ops/tickets", strings.NewReader(`{"priority":2,"title":"Disk full"}`))
			req.Header.Set("Authorization", "Bearer t")
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			var v map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
		}
	})
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

// A protected service's host name written in compatibility characters is the same host: it is
// refused by name, as the transport would dial it.
func TestProtectedNameInCompatibilityCharacters(t *testing.T) {
	prot, err := ResolveProtected(context.Background(), []Service{{Name: "approver page", Host: "localhost", Port: 8780}})
	if err != nil {
		t.Fatal(err)
	}
	f := NewFetcher(FetchConfig{Protected: prot, AllowAddr: func(netip.AddrPort) bool { return true }})
	_, err = f.Fetch(context.Background(), "http://ｌｏｃａｌｈｏｓｔ:8780/")
	var be *BlockedAddressError
	if !errors.As(err, &be) || be.Host != "localhost:8780" || !errors.Is(err, ErrProtectedAddress) {
		t.Fatalf("fullwidth localhost: %v", err)
	}
}

// A server that echoes the secret in its status line or its content type does not get it into
// the call's result either (the model, the history and the audit read it).
func TestHTTPCapabilitySecretEchoedInStatusOrContentType(t *testing.T) {
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		fmt.Fprintf(buf, "HTTP/1.1 401 token %s revoked\r\nContent-Type: application/json; charset=utf-8; key=%q\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}", auth, auth)
		buf.Flush()
	})
	doc := httpEntry("external-write", "external", "5s", fmt.Sprintf(createBlock, rec.srv.URL), `["labels","priority","project","title"]`)
	c, err := loadHTTP(t, doc, rec, true, staticSecrets(map[string]string{"tickets-token": "s3cr3t-value"}))
	if err != nil {
		t.Fatal(err)
	}
	out, err := call(t, c, `{"project":"ops","title":"Disk full"}`)
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	if out.Error == "" || !strings.Contains(out.Error, "401") {
		t.Fatalf("want the 401 reported: %q", out.Error)
	}
	if strings.Contains(out.Error, "s3cr3t-value") || strings.Contains(string(out.Data), "s3cr3t-value") {
		t.Errorf("the echoed secret came back: error %q, data %s", out.Error, out.Data)
	}
}
