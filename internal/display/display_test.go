package display

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

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

// displayCases is the approver-display case file, read at test time (never copied).
const displayCases = "../../../shared/cases/approver-display.jsonl"

type displayCase struct {
	ID    string `json:"id"`
	Note  string `json:"note"`
	Input struct {
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"input"`
	Expect struct {
		Flags            []Flag   `json:"flags"`
		Shows            []string `json:"shows"`
		Inert            bool     `json:"inert"`
		FullViewContains string   `json:"full_view_contains"`
	} `json:"expect"`
}

// TestApproverDisplayCases checks every case of approver-display.jsonl: every expected flag is
// raised on a field, every expected `shows` string appears in the shown lines, markup stays
// literal text with nothing flagged, and the full view of a truncated value reaches its tail
// while the short one is bounded.
func TestApproverDisplayCases(t *testing.T) {
	data, err := os.ReadFile(displayCases)
	if err != nil {
		t.Fatalf("case file is required: %v", err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var c displayCase
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("case line: %v", err)
		}
		n++
		t.Run(c.ID, func(t *testing.T) {
			fields, err := Arguments(c.Input.Arguments, 0)
			if err != nil {
				t.Fatal(err)
			}
			raised := map[Flag]bool{}
			var shown, full strings.Builder
			for _, f := range fields {
				for _, fl := range f.Flags {
					raised[fl] = true
				}
				shown.WriteString(f.Line() + "\n")
				full.WriteString(f.Full + "\n")
				if f.Has(FlagTruncated) {
					if n := utf8.RuneCountInString(f.Short); n > DefaultLimit+60 {
						t.Errorf("%s: short view has %d runes", f.Path, n)
					}
					if !strings.Contains(f.Short, "truncated") {
						t.Errorf("%s: short view has no truncation marker: %q", f.Path, f.Short)
					}
				}
				if len(f.Flags) == 0 && strings.Contains(f.Line(), "[flags") {
					t.Errorf("%s: unflagged field shows flags", f.Path)
				}
			}
			for _, fl := range c.Expect.Flags {
				if !raised[fl] {
					t.Errorf("flag %s not raised (raised %v); %s", fl, raised, c.Note)
				}
			}
			for _, s := range c.Expect.Shows {
				if !strings.Contains(shown.String(), s) {
					t.Errorf("%q not shown in:\n%s", s, shown.String())
				}
			}
			if c.Expect.FullViewContains != "" && !strings.Contains(full.String(), c.Expect.FullViewContains) {
				t.Errorf("full view lacks %q", c.Expect.FullViewContains)
			}
			if c.Expect.Inert {
				if len(raised) != 0 {
					t.Errorf("inert value flagged %v", raised)
				}
				// Markup is kept literally (a web page escapes it; a terminal prints it as text).
				var args map[string]string
				_ = json.Unmarshal(c.Input.Arguments, &args)
				for _, v := range args {
					if !strings.Contains(shown.String(), v) {
						t.Errorf("markup %q not shown literally", v)
					}
				}
			}
			// Nothing hidden survives in what is shown.
			for _, f := range fields {
				if Flagged(f.Short) || Flagged(f.Full) || Flagged(f.Path) {
					t.Errorf("%s: shown text still holds a hidden rune: %q", f.Path, f.Short)
				}
			}
			if _, err := Egress(c.Input.Arguments, 0); err != nil {
				t.Error(err)
			}
		})
	}
	if n == 0 {
		t.Fatal("no cases")
	}
}

func TestShowFlagsAndLimits(t *testing.T) {
	v := Show("a\u200bb\u202ec\x07\xff", 0)
	if got := fmt.Sprint(v.Flags); got != "[bidi_control invisible control invalid_utf8]" {
		t.Errorf("flags %s", got)
	}
	if v.Short != "a<U+200B>b<U+202E>c<U+0007><0xFF>" || v.Full != v.Short {
		t.Errorf("shown %q", v.Short)
	}
	// Tag characters (invisible prompt smuggling) and variation selectors are invisible.
	if v := Show("hi\U000E0041\U000E0042\ufe0f", 0); !v.Has(FlagInvisible) || v.Short != "hi<U+E0041><U+E0042><U+FE0F>" {
		t.Errorf("tags: %+v", v)
	}
	// Truncation never splits a marker and keeps the full value.
	long := strings.Repeat("\u202e", 100)
	v = Show(long, 20)
	if !v.Has(FlagTruncated) || !strings.HasPrefix(v.Short, "<U+202E><U+202E>…") || v.Full != Visible(long) {
		t.Errorf("truncated: %q", v.Short)
	}
	// Hosts: mixed scripts within a label are flagged; a single-script IDN or a Japanese
	// label is not, but its ASCII form is shown.
	for in, want := range map[string]bool{
		"https://\u0430pple.example/login": true,
		"ops@p\u0430ypal.com":              true,
		"https://münchen.de/":              false,
		"https://пример.рф/":               false,
		"https://東京tokyo.jp/":              false,
		"https://example.com/":             false,
	} {
		v := Show(in, 0)
		if v.Has(FlagMixedScriptHost) != want {
			t.Errorf("%s: mixed_script_host = %v", in, !want)
		}
		if want && (len(v.Hosts) != 1 || !strings.HasPrefix(v.Hosts[0], "xn--")) {
			t.Errorf("%s: hosts %v", in, v.Hosts)
		}
	}
	if got := Show("https://\u0430pple.example/login", 0).Line(); got != "https://\u0430pple.example/login [host xn--pple-43d.example] [flags: mixed_script_host, host_differs]" {
		t.Errorf("line %q", got)
	}
	// A host written otherwise than the form the HTTP client dials is flagged, and the dialed
	// form shown: compatibility characters (the host contacted is example.com, not a punycode
	// of fullwidth letters), percent-escapes, non-ASCII labels. Case alone is not a difference.
	for in, dialed := range map[string]string{
		"https://ｅｘａｍｐｌｅ．com/a":    "example.com",
		"https://m%C3%BCnchen.de/": "xn--mnchen-3ya.de",
		"https://münchen.de/":      "xn--mnchen-3ya.de",
		"see ＥＸＡＭＰＬＥ.com":          "example.com",
	} {
		v := Show(in, 0)
		if !v.Has(FlagHostDiffers) || len(v.Hosts) != 1 || v.Hosts[0] != dialed {
			t.Errorf("%s: flags %v hosts %v, want host_differs and %s", in, v.Flags, v.Hosts, dialed)
		}
	}
	for _, in := range []string{"https://Example.COM/x", "ops@example.org", "https://127.0.0.1:8080/", "https://[::1]/"} {
		if v := Show(in, 0); v.Has(FlagHostDiffers) || len(v.Hosts) != 0 {
			t.Errorf("%s: flags %v hosts %v, want neither", in, v.Flags, v.Hosts)
		}
	}
}

func TestSummaryIsBounded(t *testing.T) {
	for in, want := range map[string]string{
		"admit web.fetch":                            "admit web.fetch",
		"admit evil\u202e\x1b[2J":                    "admit evil<U+202E><U+001B>[2J",
		"admit " + strings.Repeat("x", 90):           "admit xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…",
		"admit \u202e\u202e\u202e\u202e\u202e\u202e": "admit <U+202E><U+202E><U+202E><U+202E>…",
	} {
		if got := Summary(in, 40); got != want {
			t.Errorf("Summary(%q) = %q, want %q", in, got, want)
		}
		if n := utf8.RuneCountInString(Summary(in, 40)); n > 40 {
			t.Errorf("%d runes", n)
		}
	}
}

func TestArgumentsPathsAndEgress(t *testing.T) {
	raw := json.RawMessage(`{"url":"https://a.example/x","to":["bob@b.example"],"amount":12.50,"nested":{"we\u202eird key":true},"e":{},"n":null}`)
	fields, err := Arguments(raw, 0)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range fields {
		lines = append(lines, f.Line())
	}
	want := []string{"url = https://a.example/x", "to[0] = bob@b.example", "amount = 12.50",
		`nested["we<U+202E>ird key"] = true [flags: bidi_control]`, "e = {}", "n = null"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	eg, err := Egress(raw, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range eg {
		got = append(got, e.Kind+" "+e.Path+" "+e.Short)
	}
	if strings.Join(got, "|") != "url url https://a.example/x|recipient to[0] bob@b.example|amount amount 12.50" {
		t.Errorf("egress %v", got)
	}
	if _, err := Arguments(json.RawMessage(`{"a":1} x`), 0); err == nil {
		t.Error("trailing data accepted")
	}
	if _, err := Arguments(json.RawMessage(`{"a":`), 0); err == nil {
		t.Error("truncated JSON accepted")
	}
}

func TestOneLineKeepsWhatMustBeFlagged(t *testing.T) {
	if got := OneLine("  a \n\tb\r\nc\xff  "); got != "a b\r c\xff" {
		t.Errorf("OneLine = %q", got)
	}
	if got := fmt.Sprint(Union([]Flag{FlagTruncated, FlagBidi}, []Flag{FlagControl, FlagBidi})); got != "[bidi_control control truncated]" {
		t.Errorf("Union = %s", got)
	}
}

// Prose is not a host: only URLs, e-mail domains and words shaped like host names are checked
// as hosts, so a spoofed amount ("05.9999" after a bidi override) is not reported as one.
func TestProseIsNotTakenForAHost(t *testing.T) {
	for _, s := range []string{"refund \u202e05.9999 tnuoma\u202c", "version 1.2.3", "3.14", "see e.g. this"} {
		if v := Show(s, 0); len(v.Hosts) != 0 || slices.Contains(v.Flags, FlagMixedScriptHost) {
			t.Errorf("Show(%q) hosts %v flags %v, want none", s, v.Hosts, v.Flags)
		}
	}
	for _, s := range []string{"\u0430pple.example", "https://\u0430pple.example/x", "ops@\u0430pple.example"} {
		if v := Show(s, 0); len(v.Hosts) != 1 || !slices.Contains(v.Flags, FlagMixedScriptHost) {
			t.Errorf("Show(%q) hosts %v flags %v, want the xn-- host flagged", s, v.Hosts, v.Flags)
		}
	}
}

// Every code point that renders as nothing or disguises its neighbours is shown and flagged:
// the rest of Default_Ignorable_Code_Point beyond format characters, overlay and enclosing
// marks, private use.
func TestIgnorableOverlayAndPrivateUseAreFlagged(t *testing.T) {
	for _, r := range []rune{0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F, 0x16FE4, 0x0336, 0x20E0, 0xE000} {
		s := "a" + string(r) + "b"
		if !Flagged(s) || !strings.Contains(Visible(s), fmt.Sprintf("<U+%04X>", r)) {
			t.Errorf("U+%04X: Visible = %q, want it shown and flagged", r, Visible(s))
		}
	}
	for _, s := range []string{"café", "naïve", "日本語", "Ελληνικά", "e\u0301"} {
		if Flagged(s) {
			t.Errorf("%q is ordinary text, flagged as %q", s, Visible(s))
		}
	}
}

// JSON writes hidden runes as \u escapes: the same JSON value, nothing raw for a terminal.
func TestJSONEscapesHiddenRunesAndKeepsTheValue(t *testing.T) {
	v := map[string]string{"id": "c1\u202e", "subject": "x\u200by\U000E0041", "note": "line\tone café"}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got := JSON(b)
	if Flagged(strings.ReplaceAll(string(got), "\n", "")) { // the indentation's newlines stay
		t.Fatalf("hidden runes remain: %q", got)
	}
	for _, want := range []string{`\u202e`, `\u200b`, `\udb40\udc41`, "café", "\n  "} {
		if !strings.Contains(string(got), want) {
			t.Errorf("JSON(...) = %s, lacks %q", got, want)
		}
	}
	var back map[string]string
	if err := json.Unmarshal(got, &back); err != nil || fmt.Sprint(back) != fmt.Sprint(v) {
		t.Fatalf("round trip = %v, %v; want %v", back, err, v)
	}
}

// A key is cut to the limit like a value, flagged truncated and quoted (the cut key is not a
// plain identifier), so no surface prints a model's 21 KB key whole.
func TestArgumentKeysAreCutToTheLimit(t *testing.T) {
	long := strings.Repeat("k", 21000)
	fs, err := Arguments(json.RawMessage(`{"`+long+`":"x","to":"y"}`), 200)
	if err != nil || len(fs) != 2 {
		t.Fatalf("fields %+v, %v", fs, err)
	}
	if n := utf8.RuneCountInString(fs[0].Path); n > 210 || !strings.HasSuffix(fs[0].Path, `…"]`) || !fs[0].Has(FlagTruncated) {
		t.Fatalf("long key shown as %d runes %q…, flags %v", n, fs[0].Path[:20], fs[0].Flags)
	}
	if fs[1].Path != "to" || fs[1].Has(FlagTruncated) {
		t.Fatalf("short key: %+v", fs[1])
	}
}
