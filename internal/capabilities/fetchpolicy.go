package capabilities

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// The web.fetch address policy, applied to every address the fetcher connects to (after DNS,
// for every redirect hop and every connection attempt) and to IP-literal and protected
// hostnames in the URL and each redirect target, in this order:
//
//  1. Protected (the deny-list) always wins: the addresses of Airlock's own services (Temporal
//     frontend, its HTTP API and Web UI, the approver page, the store) are never reached,
//     whatever the allow-list says, and whether they are public or not.
//  2. A public address (PublicAddr) is reachable.
//  3. A non-public address is reachable only when an allow-list entry (AllowRule) matches it.

// Errors of the address policy's configuration.
var (
	// ErrAllowList: an entry of the fetch allow-list does not parse. The message names the
	// entry and what a valid one looks like.
	ErrAllowList = errors.New("capabilities: invalid fetch allow-list entry")
	// ErrProtectedService: a protected service's address cannot be turned into IP addresses
	// (bad port, a hostname that does not resolve, no interface list). Fail closed: a worker
	// whose deny-list is unknown must not fetch.
	ErrProtectedService = errors.New("capabilities: cannot protect service address")
)

// AllowRule is one entry of the private allow-list: the non-public addresses in Prefix, on
// Port only, or on every port when Port is 0. Prefix holds unmapped addresses (IPv4 as
// IPv4) without zones.
type AllowRule struct {
	Prefix netip.Prefix
	Port   uint16
}

// String returns the entry as written in the configuration: "10.0.0.0/8", "127.0.0.1:8080",
// "[::1]:9000".
func (r AllowRule) String() string {
	if r.Port == 0 {
		return r.Prefix.String()
	}
	return netip.AddrPortFrom(r.Prefix.Addr(), r.Port).String()
}

func (r AllowRule) matches(ap netip.AddrPort) bool {
	return r.Prefix.Contains(ap.Addr()) && (r.Port == 0 || r.Port == ap.Port())
}

// ParseAllowList parses the entries of the private allow-list. Each entry is either
//
//   - a CIDR prefix, every port: "10.0.0.0/8", "192.168.1.5/32", "fd00::/8"; the address
//     must have no bits set past the prefix length ("10.1.2.3/8" is refused: write
//     10.0.0.0/8 or 10.1.2.3/32), or
//   - an IP address and one port: "127.0.0.1:8080", "[::1]:9000".
//
// A bare IP address is refused (write /32 or /128 for every port, or ip:port for one: a bare
// "::1:9000" is an IPv6 address, not a port). Hostnames are refused: the policy is checked on
// the IP actually dialed, so a hostname would have to be resolved either once at start (a
// snapshot that goes stale) or on every connection (a lookup racing the dialer's own, which
// whoever controls that name's DNS answers); either way the names' DNS would decide which
// private addresses open. An allow-list of IP addresses is a fixed set an operator can audit.
// Zones and IPv4-mapped IPv6 forms are refused; port 0 is refused. Errors wrap ErrAllowList
// and name the entry. Blank entries are skipped.
func ParseAllowList(entries []string) ([]AllowRule, error) {
	var rules []AllowRule
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		r, err := parseAllowEntry(e)
		if err != nil {
			return nil, fmt.Errorf("%w %q: %s", ErrAllowList, e, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func parseAllowEntry(e string) (AllowRule, error) {
	const want = "want a CIDR (10.0.0.0/8) or an IP and port (127.0.0.1:8080, [::1]:9000)"
	if strings.Contains(e, "/") {
		p, err := netip.ParsePrefix(e)
		if err != nil {
			return AllowRule{}, fmt.Errorf("bad CIDR (%s)", want)
		}
		if err := plainAddr(p.Addr()); err != nil {
			return AllowRule{}, err
		}
		if p != p.Masked() {
			return AllowRule{}, fmt.Errorf("address has bits set past /%d: write %s for the network or %s/%d for the one address",
				p.Bits(), p.Masked(), p.Addr(), p.Addr().BitLen())
		}
		return AllowRule{Prefix: p}, nil
	}
	if _, err := netip.ParseAddr(e); err == nil {
		return AllowRule{}, errors.New("a bare IP address: write ip/32 (or /128) for every port, or ip:port for one port")
	}
	host, port, err := net.SplitHostPort(e)
	if err != nil {
		return AllowRule{}, errors.New(want)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return AllowRule{}, fmt.Errorf("host %q is not an IP address (hostnames are not accepted: the allow-list is matched against the IP dialed)", host)
	}
	if err := plainAddr(ip); err != nil {
		return AllowRule{}, err
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return AllowRule{}, fmt.Errorf("bad port %q: want 1-65535", port)
	}
	return AllowRule{Prefix: netip.PrefixFrom(ip, ip.BitLen()), Port: uint16(n)}, nil
}

func plainAddr(ip netip.Addr) error {
	if ip.Zone() != "" {
		return errors.New("zones (%eth0) are not accepted")
	}
	if ip.Is4In6() {
		return fmt.Errorf("IPv4-mapped address: write the IPv4 form %s", ip.Unmap())
	}
	return nil
}

// Service is an Airlock service whose address web.fetch must never reach: the input of
// ResolveProtected.
type Service struct {
	// Name says which service it is in errors ("Temporal UI"); it must not hold secrets.
	Name string
	// Host is an IP address, a hostname, or "" for a service listening on every interface.
	Host string
	// Port is the TCP port; 0 is refused.
	Port uint16
}

// ProtectedAddr is one rule of the deny-list: Port on the addresses in Prefix is Service.
// When Host is set the rule also matches a URL naming that host (case-insensitive) on Port,
// before any DNS lookup.
type ProtectedAddr struct {
	Service string
	Prefix  netip.Prefix
	Host    string
	Port    uint16
}

// localPrefixes are where a service on this machine answers whatever IP its configuration
// names: all of loopback, and the unspecified addresses (a connect to 0.0.0.0 or :: reaches
// the local host).
var localPrefixes = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("0.0.0.0/32"),
	netip.MustParsePrefix("::/128"),
}

// ResolveProtected turns the services' addresses into deny-list rules, once, at worker start.
// For each service, its port is denied
//
//   - on the IPs its host names: an IP literal as given; "localhost" as 127.0.0.1 and ::1
//     (without asking DNS); any other hostname as everything it resolves to now (ctx bounds
//     the lookups), plus the name itself, matched in URLs before resolution; and
//   - on every address of this machine: all of 127.0.0.0/8, ::1, 0.0.0.0, :: and each IP
//     from net.InterfaceAddrs. A server listening on 0.0.0.0:7233 is reachable through every
//     local IP, and the configuration rarely says which address a local service bound, so the
//     port is closed on all of them. For a remote service this also closes that port locally,
//     which costs nothing: local addresses are non-public and open only by allow-list.
//
// Interface addresses are read once; an interface that appears later is not covered. Errors
// (a hostname that does not resolve, port 0, no interface list) wrap ErrProtectedService and
// name the service: the worker must not start with an unknown deny-list.
func ResolveProtected(ctx context.Context, services []Service) ([]ProtectedAddr, error) {
	ifaces, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("%w: list this machine's addresses: %w", ErrProtectedService, err)
	}
	local := append([]netip.Prefix(nil), localPrefixes...)
	for _, a := range ifaces {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				ip = ip.Unmap()
				local = append(local, netip.PrefixFrom(ip, ip.BitLen()))
			}
		}
	}
	var out []ProtectedAddr
	for _, s := range services {
		if s.Port == 0 {
			return nil, fmt.Errorf("%w: %s: no port", ErrProtectedService, s.Name)
		}
		ips, name, err := resolveHost(ctx, s.Host)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrProtectedService, s.Name, err)
		}
		if name != "" {
			out = append(out, ProtectedAddr{Service: s.Name, Host: name, Port: s.Port})
		}
		for _, ip := range ips {
			out = append(out, ProtectedAddr{Service: s.Name, Prefix: netip.PrefixFrom(ip, ip.BitLen()), Port: s.Port})
		}
		for _, p := range local {
			out = append(out, ProtectedAddr{Service: s.Name, Prefix: p, Port: s.Port})
		}
	}
	return out, nil
}

// resolveHost returns the IPs of host (unmapped, zoneless) and, for a hostname, its
// normalized name.
func resolveHost(ctx context.Context, host string) ([]netip.Addr, string, error) {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "" {
		return nil, "", nil // every interface: the local rules cover it
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip.WithZone("").Unmap()}, "", nil
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}, host, nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, "", fmt.Errorf("resolve %s: %w", host, err)
	}
	ips := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		ips = append(ips, a.WithZone("").Unmap())
	}
	return ips, host, nil
}
