package display

import "testing"

func TestVisibleShowsWhatWouldActOrHide(t *testing.T) {
	cases := map[string]string{
		"alice":                         "alice",
		"evil\x1b[31mRED\u202eTXT\a":    "evil<U+001B>[31mRED<U+202E>TXT<U+0007>",
		"no\x1b]0;pwned\a\x1b[2J":       "no<U+001B>]0;pwned<U+0007><U+001B>[2J",
		"a\u200bb\ufeffc\u2066d\u0085e": "a<U+200B>b<U+FEFF>c<U+2066>d<U+0085>e",
		"line1\nline2\r":                "line1<U+000A>line2<U+000D>",
		"bad\xffbyte":                   "bad<0xFF>byte",
		"Zürich 東京 ✓":                   "Zürich 東京 ✓",
	}
	for in, want := range cases {
		if got := Visible(in); got != want {
			t.Errorf("Visible(%q) = %q, want %q", in, got, want)
		}
		if Flagged(in) != (in != want) {
			t.Errorf("Flagged(%q) = %v", in, Flagged(in))
		}
	}
	if got := Text("a\tb\nc\x1b[0m"); got != "a\tb\nc<U+001B>[0m" {
		t.Errorf("Text = %q", got)
	}
}
