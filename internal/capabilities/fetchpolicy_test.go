package capabilities

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

// allowLoopback opens the loopback ranges, where the tests' servers listen.
var allowLoopback = mustAllow("127.0.0.0/8", "::1/128")

func mustAllow(entries ...string) []AllowRule {
	rules, err := ParseAllowList(entries)
	if err != nil {
		panic(err)
	}
	return rules
}

func protect(t *testing.T, services ...Service) []ProtectedAddr {
	t.Helper()
	p, err := ResolveProtected(context.Background(), services)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func wantBlocked(t *testing.T, err error, reason BlockReason, addr string) *BlockedAddressError {
	t.Helper()
	var be *BlockedAddressError
	if !errors.As(err, &be) || !errors.Is(err, ErrBlockedAddress) {
		t.Fatalf("error = %v, want a *BlockedAddressError", err)
	}
	if be.Reason != reason {
		t.Fatalf("error = %v: reason %d, want %d", err, be.Reason, reason)
	}
	if errors.Is(err, ErrProtectedAddress) != (reason == BlockProtected) {
		t.Fatalf("error = %v: errors.Is(ErrProtectedAddress) wrong for reason %d", err, reason)
	}
	if !strings.Contains(err.Error(), addr) {
		t.Fatalf("error = %v, want it to name %s", err, addr)
	}
	return be
}

func hostPort(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	return strings.TrimPrefix(srv.URL, "http://")
}

// Without an allow-list a private (here loopback) address is refused, with the rule named.
func TestFetchPrivateBlockedByDefault(t *testing.T) {
	srv, hits := countingServer(t, okHandler)
	for name, cfg := range map[string]FetchConfig{
		"zero config":           {},
		"unrelated allow-list":  {Allow: mustAllow("10.0.0.0/8", "192.168.1.5:80")},
		"other port, same host": {Allow: mustAllow(fmt.Sprintf("127.0.0.1:%d", serverPort(t, srv)+1))},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewFetcher(cfg).Fetch(context.Background(), srv.URL+"/")
			wantBlocked(t, err, BlockNotAllowed, hostPort(t, srv))
			if !strings.Contains(err.Error(), "not public and not in the fetch allow-list") {
				t.Errorf("error = %v, want the rule named", err)
			}
		})
	}
	if hits.Load() != 0 {
		t.Errorf("server saw %d requests, want 0", hits.Load())
	}
}

// A CIDR entry opens every port in it; a host:port entry opens that port only.
func TestFetchAllowList(t *testing.T) {
	a, aHits := countingServer(t, okHandler)
	b, bHits := countingServer(t, okHandler)
	cidr := NewFetcher(FetchConfig{Allow: mustAllow("127.0.0.0/8")})
	for _, srv := range []*httptest.Server{a, b} {
		if c, err := cidr.Fetch(context.Background(), srv.URL+"/"); err != nil || c.Content != "hello" {
			t.Fatalf("CIDR 127.0.0.0/8: Fetch(%s) = %+v, %v", srv.URL, c, err)
		}
	}
	onlyA := NewFetcher(FetchConfig{Allow: mustAllow(hostPort(t, a))})
	if _, err := onlyA.Fetch(context.Background(), a.URL+"/"); err != nil {
		t.Fatalf("host:port %s: %v", hostPort(t, a), err)
	}
	// The same host on another port is refused, also when reached by name (checked at dial).
	_, err := onlyA.Fetch(context.Background(), b.URL+"/")
	wantBlocked(t, err, BlockNotAllowed, hostPort(t, b))
	_, err = onlyA.Fetch(context.Background(), fmt.Sprintf("http://localhost:%d/", serverPort(t, b)))
	wantBlocked(t, err, BlockNotAllowed, fmt.Sprintf(":%d", serverPort(t, b)))
	if aHits.Load() != 2 || bHits.Load() != 1 {
		t.Errorf("hits a=%d b=%d, want 2 and 1", aHits.Load(), bHits.Load())
	}
}

// The attack of issue 7: an allowed page redirects into the Temporal UI's API. The UI is
// protected, so every way of addressing it is refused even though the allow-list opens all
// of loopback, and the UI never sees a request.
func TestFetchRedirectIntoProtectedServiceRefused(t *testing.T) {
	ui, uiHits := countingServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"history":"another turn's token"}`)
	})
	uiPort := serverPort(t, ui)
	var location string
	page, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, location, http.StatusFound)
	})
	f := NewFetcher(FetchConfig{
		Allow:     mustAllow("127.0.0.0/8", "::1/128", "0.0.0.0/0"),
		Protected: protect(t, Service{Name: "Temporal UI", Host: "localhost", Port: uiPort}),
	})
	api := "/api/v1/namespaces/default/workflows/turn%2Fother%2F1/history"
	for _, loc := range []string{
		fmt.Sprintf("http://127.0.0.1:%d%s", uiPort, api),  // IP literal: refused by CheckRedirect
		fmt.Sprintf("http://LocalHost.:%d%s", uiPort, api), // the protected name: refused before DNS
		fmt.Sprintf("http://127.0.0.2:%d%s", uiPort, api),  // anywhere on loopback
		fmt.Sprintf("http://[::ffff:127.0.0.1]:%d%s", uiPort, api),
		fmt.Sprintf("http://[::1]:%d%s", uiPort, api),
		fmt.Sprintf("http://0.0.0.0:%d%s", uiPort, api), // the unspecified address reaches the host
		fmt.Sprintf("http://[::]:%d%s", uiPort, api),
	} {
		t.Run(loc, func(t *testing.T) {
			location = loc
			_, err := f.Fetch(context.Background(), page.URL+"/start")
			wantBlocked(t, err, BlockProtected, fmt.Sprintf(":%d", uiPort))
			if !strings.Contains(err.Error(), "protected Airlock service: Temporal UI") {
				t.Errorf("error = %v, want the service named", err)
			}
		})
	}
	// Directly, too.
	_, err := f.Fetch(context.Background(), ui.URL+"/")
	wantBlocked(t, err, BlockProtected, hostPort(t, ui))
	// Protected by IP, reached through a hostname: refused on the address dialed.
	byIP := NewFetcher(FetchConfig{
		Allow:     mustAllow("127.0.0.0/8", "::1/128"),
		Protected: protect(t, Service{Name: "Temporal UI", Host: "127.0.0.1", Port: uiPort}),
	})
	location = fmt.Sprintf("http://localhost:%d%s", uiPort, api)
	_, err = byIP.Fetch(context.Background(), page.URL+"/start")
	be := wantBlocked(t, err, BlockProtected, fmt.Sprintf(":%d", uiPort))
	if be.Host != "" || !be.Addr.Addr().IsLoopback() {
		t.Errorf("refused %+v, want the dialed loopback address", be)
	}
	if uiHits.Load() != 0 {
		t.Errorf("the protected service saw %d requests, want 0", uiHits.Load())
	}
	// The allow-list still works for everything else.
	other, _ := countingServer(t, okHandler)
	location = other.URL + "/"
	if c, err := f.Fetch(context.Background(), page.URL+"/start"); err != nil || c.Content != "hello" {
		t.Fatalf("redirect to an allowed server: %+v, %v", c, err)
	}
}

// A service listening on every interface answers on this machine's own addresses too: a
// protected port is refused there, even when the allow-list opens everything.
func TestFetchProtectedPortRefusedOnInterfaceAddresses(t *testing.T) {
	var ifaceIP netip.Addr
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap().Is4() && !ip.IsLoopback() {
				ifaceIP = ip.Unmap()
				break
			}
		}
	}
	if !ifaceIP.IsValid() {
		t.Skip("this machine has no non-loopback IPv4 interface address")
	}
	l, err := net.Listen("tcp4", "0.0.0.0:0") // like a frontend started with --ip 0.0.0.0
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		okHandler(w, r)
	})}}
	srv.Start()
	t.Cleanup(srv.Close)
	port := uint16(l.Addr().(*net.TCPAddr).Port)
	target := fmt.Sprintf("http://%s/", netip.AddrPortFrom(ifaceIP, port))

	open := NewFetcher(FetchConfig{Allow: mustAllow("0.0.0.0/0")})
	if _, err := open.Fetch(context.Background(), target); err != nil {
		t.Fatalf("unprotected, the server answers on %s: %v", target, err)
	}
	f := NewFetcher(FetchConfig{
		Allow:     mustAllow("0.0.0.0/0"),
		Protected: protect(t, Service{Name: "Temporal frontend", Host: "127.0.0.1", Port: port}),
	})
	_, err = f.Fetch(context.Background(), target)
	wantBlocked(t, err, BlockProtected, ifaceIP.String())
	if hits.Load() != 1 {
		t.Errorf("server saw %d requests, want only the unprotected one", hits.Load())
	}
}

// The deny-list applies to public addresses too (a frontend on a public IP).
func TestFetchProtectedPublicAddress(t *testing.T) {
	f := NewFetcher(FetchConfig{Protected: protect(t, Service{Name: "Temporal frontend", Host: "203.0.113.7", Port: 7233},
		Service{Name: "store", Host: "8.8.8.8", Port: 5432})})
	_, err := f.Fetch(context.Background(), "http://8.8.8.8:5432/")
	wantBlocked(t, err, BlockProtected, "8.8.8.8:5432")
	if !strings.Contains(err.Error(), "store") {
		t.Errorf("error = %v, want the service named", err)
	}
	if be := f.check(netip.MustParseAddrPort("8.8.8.8:5433")); be != nil {
		t.Errorf("another port of a public protected host is refused: %v", be)
	}
}

func TestParseAllowList(t *testing.T) {
	rules, err := ParseAllowList([]string{" 10.0.0.0/8", "", "192.168.1.5/32", "127.0.0.1:8080", "[::1]:9000", "fd00::/8"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rules {
		got = append(got, r.String())
	}
	if strings.Join(got, " ") != "10.0.0.0/8 192.168.1.5/32 127.0.0.1:8080 [::1]:9000 fd00::/8" {
		t.Fatalf("rules = %q", got)
	}
	for _, tt := range []struct{ entry, want string }{
		{"10.0.0.0/33", "bad CIDR"},
		{"10.0.0/8", "bad CIDR"},
		{"10.1.2.3/8", "write 10.0.0.0/8 for the network or 10.1.2.3/32"},
		{"10.0.0.1", "bare IP"},
		{"::1", "bare IP"},
		{"127.0.0.1:0", "bad port"},
		{"127.0.0.1:65536", "bad port"},
		{"127.0.0.1:http", "bad port"},
		{"127.0.0.1", "bare IP"},
		{"db.internal:5432", "not an IP address"},
		{"fe80::1%eth0/64", "bad CIDR"},
		{"[fe80::1%eth0]:80", "zones"},
		{"[::ffff:10.0.0.1]:80", "write the IPv4 form 10.0.0.1"},
		{"10.0.0.0/8 10.1.0.0/16", "bad CIDR"},
		{"localhost", "want a CIDR"},
	} {
		t.Run(tt.entry, func(t *testing.T) {
			_, err := ParseAllowList([]string{"10.0.0.0/8", tt.entry})
			if !errors.Is(err, ErrAllowList) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.entry)) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseAllowList(%q) error = %v, want ErrAllowList naming the entry and %q", tt.entry, err, tt.want)
			}
		})
	}
}

func TestResolveProtectedRefusesWhatItCannotPlace(t *testing.T) {
	if _, err := ResolveProtected(context.Background(), []Service{{Name: "approver page", Host: "127.0.0.1"}}); !errors.Is(err, ErrProtectedService) || !strings.Contains(err.Error(), "approver page") {
		t.Fatalf("port 0: %v", err)
	}
	p := protect(t, Service{Name: "approver page", Host: "", Port: 8780}) // ":8780", every interface
	f := NewFetcher(FetchConfig{Allow: allowLoopback, Protected: p})
	for _, ap := range []string{"127.0.0.1:8780", "127.9.9.9:8780", "[::1]:8780", "0.0.0.0:8780"} {
		if be := f.check(netip.MustParseAddrPort(ap)); be == nil || be.Reason != BlockProtected {
			t.Errorf("%s: %v, want protected", ap, be)
		}
	}
	if be := f.check(netip.MustParseAddrPort("127.0.0.1:8781")); be != nil {
		t.Errorf("another port: %v", be)
	}
}

// A destination declared internal is dialed only at a non-public address the allow-list
// admits: a public address is refused (BlockPublic) before any connection, even where the
// ordinary policy would connect to it, and Airlock's own services stay refused.
func TestFetchInternalOnlyDialsAllowedPrivateAddresses(t *testing.T) {
	a, hits := countingServer(t, okHandler)
	f := NewFetcher(FetchConfig{Allow: mustAllow(hostPort(t, a)),
		Protected: protect(t, Service{Name: "store", Host: "127.0.0.1", Port: 5432})})
	in := f.Internal()
	if in == f || in.Internal() != in || f.Internal() != in {
		t.Fatal("Internal must be one fetcher per Fetcher, and idempotent")
	}
	if c, err := in.Fetch(context.Background(), a.URL+"/"); err != nil || c.Content != "hello" {
		t.Fatalf("allow-listed private address: %+v, %v", c, err)
	}
	if be := f.check(netip.MustParseAddrPort("93.184.216.34:443")); be != nil {
		t.Fatalf("the ordinary policy connects to a public address: %v", be)
	}
	_, err := in.Fetch(context.Background(), "http://93.184.216.34/")
	wantBlocked(t, err, BlockPublic, "93.184.216.34:80")
	if !strings.Contains(err.Error(), "declared internal") {
		t.Errorf("error = %v, want it to say why", err)
	}
	if be := in.check(netip.MustParseAddrPort("10.1.2.3:80")); be == nil || be.Reason != BlockNotAllowed {
		t.Errorf("a private address outside the allow-list: %v", be)
	}
	if be := in.check(netip.MustParseAddrPort("127.0.0.1:5432")); be == nil || be.Reason != BlockProtected {
		t.Errorf("a protected service: %v", be)
	}
	if hits.Load() != 1 {
		t.Errorf("hits = %d, want 1", hits.Load())
	}
}
