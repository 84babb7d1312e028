// Package display renders hostile text (anything a model, a recording, a tool result or a
// signal sender wrote) for people: control characters (C0, DEL, C1: terminal escapes, bells,
// carriage returns), bidirectional controls and invisible characters (zero-width, word joiner,
// BOM) are made visible as <U+XXXX>, so what an approver or operator reads is what was sent
// (DESIGN "Hostile text is shown faithfully").
package display

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// hidden reports a rune that would act on the terminal or hide or reorder text instead of
// showing itself.
func hidden(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f: // C0 (newline and tab included), DEL, C1
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069: // bidi
		return true
	case r >= 0x200b && r <= 0x200d, r == 0x2060, r == 0xfeff, r == 0x00ad, r == 0x180e: // invisible
		return true
	}
	return false
}

// Visible returns s with every hidden rune (and every byte that is not UTF-8) replaced by
// <U+XXXX> (<0xXX> for a bad byte). Everything else is kept as is.
func Visible(s string) string {
	if !Flagged(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "<0x%02X>", s[i])
		case hidden(r):
			fmt.Fprintf(&b, "<U+%04X>", r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
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
