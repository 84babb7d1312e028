// Package display renders hostile text (anything a model, a recording, a tool result or a
// signal sender wrote) for people: control characters (C0, DEL, C1, line and paragraph
// separators: terminal escapes, bells, carriage returns), bidirectional controls and invisible
// characters (zero-width, word joiner, BOM, tag characters, variation selectors, other format
// characters) are made visible as <U+XXXX>, so what an approver or operator reads is what was
// sent (DESIGN "Hostile text is shown faithfully"). Show adds the flags a surface marks a value
// with and bounds its length; Arguments and Egress do so for a call's JSON arguments.
package display

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Flag names what was done to a value so it could be shown, or what about it deserves a
// second look. Surfaces print flags beside the value (terminal) or as marks (web page).
type Flag string

// Flags, in the order Show reports them.
const (
	// FlagBidi: the value holds a bidirectional control (U+202A–U+202E, U+2066–U+2069, LRM,
	// RLM, ALM) that would reorder what is shown; it is shown as <U+XXXX>.
	FlagBidi Flag = "bidi_control"
	// FlagInvisible: the value holds a character that renders as nothing (zero-width
	// characters, word joiner, BOM, soft hyphen, tag characters, variation selectors, Hangul
	// fillers, other format characters); it is shown as <U+XXXX>.
	FlagInvisible Flag = "invisible"
	// FlagControl: the value holds a control character (C0 including newline and tab, DEL,
	// C1, U+2028, U+2029); it is shown as <U+XXXX>.
	FlagControl Flag = "control"
	// FlagInvalidUTF8: the value holds bytes that are not UTF-8; each is shown as <0xXX>.
	FlagInvalidUTF8 Flag = "invalid_utf8"
	// FlagMixedScriptHost: a host name in the value mixes scripts within one label (a
	// Cyrillic "а" in "аpple.example"); its ASCII (punycode, xn--) form is shown besides.
	FlagMixedScriptHost Flag = "mixed_script_host"
	// FlagHostDiffers: a host name in the value is written in another form than the one the
	// HTTP client resolves and dials (DialHost: fullwidth or other compatibility characters,
	// non-ASCII labels, percent-escapes, hidden characters); the form contacted is shown
	// besides (issue 19, item 4).
	FlagHostDiffers Flag = "host_differs"
	// FlagTruncated: the value is longer than the surface's limit; Value.Short ends with a
	// marker and Value.Full holds all of it.
	FlagTruncated Flag = "truncated"
)

var flagOrder = []Flag{FlagBidi, FlagInvisible, FlagControl, FlagInvalidUTF8, FlagMixedScriptHost, FlagHostDiffers, FlagTruncated}

// class is what kind of hidden rune r is ("" when r shows itself).
func class(r rune) Flag {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f, r == 0x2028, r == 0x2029:
		return FlagControl
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return FlagBidi
	case r == 0x115f, r == 0x1160, r == 0x3164, r == 0xffa0, r == 0x2800, r == 0x034f, r == 0x16fe4, // blank letters and fillers, CGJ
		r >= 0xfe00 && r <= 0xfe0f, r >= 0xe0100 && r <= 0xe01ef, // variation selectors
		unicode.Is(unicode.Cf, r), // format characters: zero-width, word joiner, BOM, tags, soft hyphen, …
		// The rest of Unicode's Default_Ignorable_Code_Point (Khmer inherent vowels, Mongolian
		// variation selectors, fillers), which render as nothing:
		unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r), unicode.Is(unicode.Variation_Selector, r),
		// Marks drawn over or around their neighbours (strike-through, enclosing circle), which
		// change how the text reads without showing themselves, and private-use code points,
		// which have no standard glyph:
		unicode.Is(unicode.Me, r), isOverlay(r), unicode.Is(unicode.Co, r):
		return FlagInvisible
	}
	return ""
}

// isOverlay reports a combining mark of canonical combining class 1 (overlay): it is drawn
// through the preceding character (U+0334–U+0338, U+20D2–U+20D3, U+20D8–U+20DA, U+20E5–U+20E6,
// U+20EA–U+20EB, U+10A39, U+16AF0–U+16AF4, U+1BC9E, U+1D167–U+1D169).
func isOverlay(r rune) bool {
	switch {
	case r >= 0x0334 && r <= 0x0338, r == 0x1CD4, r >= 0x1CE2 && r <= 0x1CE8, r >= 0x20D2 && r <= 0x20D3,
		r >= 0x20D8 && r <= 0x20DA, r >= 0x20E5 && r <= 0x20E6, r >= 0x20EA && r <= 0x20EB, r == 0x10A39,
		r >= 0x16AF0 && r <= 0x16AF4, r == 0x1BC9E, r >= 0x1D167 && r <= 0x1D169:
		return true
	}
	return false
}

// hidden reports a rune that would act on the terminal or hide or reorder text instead of
// showing itself.
func hidden(r rune) bool { return class(r) != "" }

// Visible returns s with every hidden rune (and every byte that is not UTF-8) replaced by
// <U+XXXX> (<0xXX> for a bad byte). Everything else is kept as is.
func Visible(s string) string {
	if !Flagged(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		tok, n := token(s[i:])
		b.WriteString(tok)
		i += n
	}
	return b.String()
}

// token is the shown form of the first rune of s and its length in bytes.
func token(s string) (string, int) {
	r, n := utf8.DecodeRuneInString(s)
	switch {
	case r == utf8.RuneError && n == 1:
		return fmt.Sprintf("<0x%02X>", s[0]), 1
	case hidden(r):
		return fmt.Sprintf("<U+%04X>", r), n
	}
	return s[:n], n
}

// Flagged reports whether s holds a hidden rune or invalid UTF-8, i.e. whether Visible changes
// it: surfaces mark such values so the reader knows the text was altered to be shown.
func Flagged(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || hidden(r) {
			return true
		}
		i += n
	}
	return false
}

// CharFlags returns the flags of the hidden runes and invalid bytes in s (bidi_control,
// invisible, control, invalid_utf8), in flag order; nil when Visible leaves s unchanged.
func CharFlags(s string) []Flag {
	seen := map[Flag]bool{}
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			seen[FlagInvalidUTF8] = true
		} else if c := class(r); c != "" {
			seen[c] = true
		}
		i += n
	}
	return ordered(seen)
}

func ordered(seen map[Flag]bool) []Flag {
	var out []Flag
	for _, f := range flagOrder {
		if seen[f] {
			out = append(out, f)
		}
	}
	return out
}

// Text is Visible for multi-line text meant to keep its lines (assistant prose): newlines and
// tabs stay, every other hidden rune is made visible.
func Text(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		parts := strings.Split(l, "\t")
		for j, p := range parts {
			parts[j] = Visible(p)
		}
		lines[i] = strings.Join(parts, "\t")
	}
	return strings.Join(lines, "\n")
}

// TextFlags is CharFlags for text shown with Text: newlines and tabs, which Text keeps, are
// not flagged.
func TextFlags(s string) []Flag {
	return CharFlags(strings.NewReplacer("\n", "", "\t", "").Replace(s))
}

// Summary renders s for a one-line label that people read and nobody can scroll: a Temporal
// activity or timer summary, a memo preview. Every hidden rune is made visible and the result
// holds at most max runes (max < 16 means 16), ending with "…" when cut. It never splits a
// <U+XXXX> marker. It is deterministic and safe in workflow code.
func Summary(s string, max int) string {
	if max < 16 {
		max = 16
	}
	var b strings.Builder
	runes := 0
	for i := 0; i < len(s); {
		tok, n := token(s[i:])
		k := utf8.RuneCountInString(tok)
		if runes+k > max-1 && (runes+k > max || i+n < len(s)) {
			b.WriteString("…")
			return b.String()
		}
		b.WriteString(tok)
		runes += k
		i += n
	}
	return b.String()
}

// Union returns the flags of every list, each once, in flag order (nil for none).
func Union(lists ...[]Flag) []Flag {
	seen := map[Flag]bool{}
	for _, l := range lists {
		for _, f := range l {
			seen[f] = true
		}
	}
	return ordered(seen)
}

// OneLine joins text onto one line for a table cell or a list: each run of spaces, newlines
// and tabs becomes one space. Every other character, carriage returns and other controls
// included, is kept, so Visible and CharFlags still show and flag it.
func OneLine(s string) string {
	var b strings.Builder
	space := false
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == ' ' || c == '\n' || c == '\t' {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteByte(s[i]) // bytes, not runes: invalid UTF-8 stays for Visible to show
	}
	return b.String()
}

// JSON returns the JSON document b with every hidden rune (Flagged's) written as a \uXXXX
// escape (a surrogate pair above U+FFFF): the same JSON value, which a terminal shows without
// reordering, hiding or acting on anything. Hidden runes can only stand inside JSON strings,
// where the escape is equivalent, so b stays valid JSON; b is returned as is when it holds
// none.
func JSON(b []byte) []byte {
	if !Flagged(string(b)) {
		return b
	}
	out := make([]byte, 0, len(b)+32)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			out = append(out, `\ufffd`...) // not UTF-8: what a JSON decoder reads it as
		case hidden(r) && r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		case hidden(r) && r >= 0x20: // C0 controls are already escaped by every encoder
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}
