package capabilities

import "net/netip"

// nonPublic lists special-purpose ranges (IANA IPv4/IPv6 special-purpose registries) that
// netip's own predicates do not cover.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space (CGNAT)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation (TEST-NET-1)
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation (TEST-NET-2)
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation (TEST-NET-3)
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and 255.255.255.255 broadcast
	netip.MustParsePrefix("::/96"),           // IPv4-compatible (deprecated), :: and ::1
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use IPv4/IPv6 translation
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("2001::/32"),       // Teredo (embeds an obfuscated IPv4 address)
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("3fff::/20"),       // documentation
	netip.MustParsePrefix("fec0::/10"),       // site-local (deprecated)
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96") // well-known NAT64: last 32 bits are IPv4
	sixToFour = netip.MustParsePrefix("2002::/16")    // 6to4: bits 16-47 are IPv4
)

// PublicAddr reports whether ip is a globally reachable unicast address, the only kind
// web.fetch connects to by default. It is false for unspecified, loopback, private
// (10/8, 172.16/12, 192.168/16, fc00::/7), link-local (169.254/16, fe80::/10), multicast,
// CGNAT (100.64/10), broadcast, documentation, benchmarking and reserved ranges; an
// IPv4-mapped IPv6 address (::ffff:a.b.c.d) is judged as its IPv4 address, and NAT64
// (64:ff9b::/96) and 6to4 (2002::/16) addresses as the IPv4 address they embed. Zones are
// ignored.
func PublicAddr(ip netip.Addr) bool {
	ip = ip.WithZone("").Unmap()
	if !ip.IsValid() || ip.IsUnspecified() || ip.IsLoopback() || ip.IsPrivate() ||
		ip.IsLinkLocalUnicast() || ip.IsMulticast() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return false
		}
	}
	if ip.Is6() {
		b := ip.As16()
		switch {
		case nat64.Contains(ip):
			return PublicAddr(netip.AddrFrom4([4]byte(b[12:16])))
		case sixToFour.Contains(ip):
			return PublicAddr(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	return true
}
