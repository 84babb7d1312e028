package display

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/net/idna"
)

// ErrHost reports a host name the HTTP client would not resolve (empty, or refused by IDNA
// lookup processing).
var ErrHost = errors.New("display: not a resolvable host name")

// DialHost is the form of host name h that Go's HTTP client resolves and dials: net/http
// passes an ASCII host through and maps any other with IDNA lookup processing (UTS #46 with
// compatibility mapping: fullwidth "ｅｘａｍｐｌｅ．com" becomes "example.com", "Straße" becomes
// "strasse", non-ASCII labels become xn-- labels), and DNS ignores ASCII case, so the form
// returned is that mapping, lower-cased. IP literals (with or without brackets) are returned in
// their canonical text. Surfaces show this form and flag a host whose written form differs
// (HostDiffers), since that is the host contacted (issue 19, item 4).
func DialHost(h string) (string, error) {
	if h == "" {
		return "", fmt.Errorf("%w: empty", ErrHost)
	}
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")); err == nil {
		return a.String(), nil
	}
	if isASCII(h) {
		return strings.ToLower(h), nil
	}
	a, err := idna.Lookup.ToASCII(h)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrHost, Visible(h), err)
	}
	return strings.ToLower(a), nil
}

// HostDiffers reports whether written, a host name as it was written, is not the form that is
// resolved (DialHost) up to ASCII case: a compatibility character, a non-ASCII label, a
// percent-escape or a hidden character. A host that cannot be resolved differs.
func HostDiffers(written string) bool {
	d, err := DialHost(written)
	return err != nil || d != strings.ToLower(written)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
