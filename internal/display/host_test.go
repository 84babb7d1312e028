package display

import (
	"errors"
	"testing"
)

// DialHost gives the host net/http resolves: compatibility characters and non-ASCII labels
// are mapped the way its IDNA lookup does, and the written form is flagged when it differs.
func TestDialHostIsTheHostContacted(t *testing.T) {
	cases := []struct {
		written, dial string
		differs       bool
	}{
		{"example.com", "example.com", false},
		{"Example.COM", "example.com", false},
		{"ｅｘａｍｐｌｅ．com", "example.com", true},       // fullwidth letters and dot
		{"ex\u200bample.com", "example.com", true}, // a zero-width space is mapped away
		{"bücher.example", "xn--bcher-kva.example", true},
		{"xn--bcher-kva.example", "xn--bcher-kva.example", false},
		{"аpple.example", "xn--pple-43d.example", true}, // Cyrillic а
		{"[::1]", "::1", true},
		{"127.0.0.1", "127.0.0.1", false},
	}
	for _, tc := range cases {
		got, err := DialHost(tc.written)
		if err != nil || got != tc.dial {
			t.Errorf("DialHost(%q) = %q, %v; want %q", tc.written, got, err, tc.dial)
		}
		if d := HostDiffers(tc.written); d != tc.differs {
			t.Errorf("HostDiffers(%q) = %v, want %v", tc.written, d, tc.differs)
		}
	}
	if _, err := DialHost(""); !errors.Is(err, ErrHost) {
		t.Errorf("empty host: %v", err)
	}
	if _, err := DialHost("a\u202eb.example"); !errors.Is(err, ErrHost) {
		t.Errorf("a host with a bidi control must not resolve: %v", err)
	}
}
