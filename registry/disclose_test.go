package registry

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
)

// dialedHost is the host net/http itself dials for rawURL: a transport whose dialer records
// the address and fails, so nothing leaves the test.
func dialedHost(t *testing.T, rawURL string) string {
	t.Helper()
	var addr string
	tr := &http.Transport{Proxy: nil, DialContext: func(_ context.Context, _, a string) (net.Conn, error) {
		addr = a
		return nil, errors.New("recorded")
	}}
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatalf("%s: %v", rawURL, err)
	}
	_, _ = tr.RoundTrip(req)
	h, _, _ := net.SplitHostPort(addr)
	return h
}

// The disclosure names the host the HTTP client contacts, not the one written: for a URL in
// compatibility characters, the disclosed host is the one net/http dials (checked against a
// real transport), and the written form is kept to be flagged. It carries the registry's
// description, classes and destination and the declared fields' values.
func TestDiscloseShowsTheHostContacted(t *testing.T) {
	r, err := Load([]Source{Base(), BasePolicy()}, baseImpls())
	if err != nil {
		t.Fatal(err)
	}
	fetch, _ := r.ByKey("web.fetch@1")
	for _, tc := range []struct{ url, written string }{
		{"https://ｅｘａｍｐｌｅ．com/login", "ｅｘａｍｐｌｅ．com"},
		{"https://\u0430pple.example/", "\u0430pple.example"},
		{"https://m%C3%BCnchen.de/", "m%C3%BCnchen.de"},
		{"https://Example.com/", ""},
		{"https://example.com:8443/", ""},
	} {
		args, _ := json.Marshal(map[string]string{"url": tc.url})
		d := fetch.Disclose(args)
		if len(d.Hosts) != 1 {
			t.Fatalf("%s: hosts %+v", tc.url, d.Hosts)
		}
		h := d.Hosts[0]
		if got := dialedHost(t, tc.url); h.Host != strings.ToLower(got) {
			t.Errorf("%s: disclosed %q, net/http dials %q", tc.url, h.Host, got)
		}
		if h.Written != tc.written || h.Differs() != (tc.written != "") || h.Field != "url" {
			t.Errorf("%s: %+v, want written %q", tc.url, h, tc.written)
		}
		if d.Description == "" || d.SideEffect != SideEffectNone || d.Network != NetworkExternal || d.Destination.Name != AnyHost ||
			len(d.Leaving) != 1 || d.Leaving[0].Field != "url" {
			t.Errorf("%s: disclosure %+v", tc.url, d)
		}
	}
	if d := fetch.Disclose(json.RawMessage(`{"url":"not a url"}`)); len(d.Hosts) != 1 || d.Hosts[0].Error == "" || !d.Hosts[0].Differs() {
		t.Errorf("an unparsable URL must be an unknown host: %+v", d.Hosts)
	}
	health, _ := r.ByKey("system.health@1")
	if d := health.Disclose(json.RawMessage(`{}`)); d.Destination.Kind != DestinationNone || len(d.Hosts) != 0 || len(d.Leaving) != 0 {
		t.Errorf("system.health: %+v", d)
	}
}
