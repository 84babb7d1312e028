package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/provenance"
	"github.com/airlock-dev/airlock/workflows"
)

// hostileText holds every kind of text that must not reach a terminal raw: an ANSI screen
// clear and cursor move, a bell, a carriage return, a newline, a C1 CSI, a bidi override,
// zero-width characters, a BOM, HTML and invalid UTF-8.
const hostileText = "ok\x1b[2J\x1b[H\a\rfake\nline\u009b31m\u202eevil\u200b\u200d\ufeff<script>alert(1)</script>\xff"

// fillStrings sets every string reachable from v (fields, pointers, slice elements) to s.
func fillStrings(v reflect.Value, s string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fillStrings(v.Elem(), s)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Field(i).CanSet() {
				fillStrings(v.Field(i), s)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 { // json.RawMessage: set by the caller
			return
		}
		if v.Len() == 0 {
			v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		}
		for i := 0; i < v.Len(); i++ {
			fillStrings(v.Index(i), s)
		}
	}
}

// assertTerminalSafe fails on any rune of out, but the newlines between lines, that
// display would show as <U+XXXX>, and on bytes that are not UTF-8.
func assertTerminalSafe(t *testing.T, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		for _, line := range strings.Split(out, "\n") {
			if !utf8.ValidString(line) {
				t.Errorf("a line holds bytes that are not UTF-8: %.300q", line)
			}
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if display.Flagged(line) {
			t.Errorf("a hidden or control character reaches the terminal: %.300q", line)
		}
	}
}

// TestPendingShowsHostileTextEscaped: every model-, registry- or tool-written string of a
// pending confirmation (tool name, call id, arguments keys and values, disclosure fields,
// provenance paths and source URLs, requester) reaches `airlock pending` with its control,
// bidi and invisible characters shown as <U+XXXX>: none reaches the terminal raw.
func TestPendingShowsHostileTextEscaped(t *testing.T) {
	var p workflows.PendingConfirmation
	fillStrings(reflect.ValueOf(&p).Elem(), hostileText)
	p.ExpiresAt = time.Now()
	p.Quorum = 2
	p.PasskeyRequired = true
	args, err := json.Marshal(map[string]any{hostileText: hostileText, "to": hostileText, "url": "https://x.example/" + hostileText,
		"nested": []any{hostileText, map[string]any{hostileText: hostileText}}, "long": strings.Repeat("\u202e\x1b[2J", 5000)})
	if err != nil {
		t.Fatal(err)
	}
	p.Arguments = args
	rep := provenance.Report{Rules: hostileText, Values: []provenance.Value{
		{Path: hostileText, Kind: provenance.KindString, Text: hostileText, Status: provenance.StatusFound,
			Sources: []provenance.Source{{Kind: provenance.SourceResult, Result: 1, Capability: hostileText, CallID: hostileText, SourceURL: "https://e.example/" + hostileText}}},
		{Path: hostileText + "#url", Kind: provenance.KindURL, Text: hostileText, Status: provenance.StatusNotFound},
	}}
	if p.Provenance, err = json.Marshal(rep); err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int{0, -1} {
		var out bytes.Buffer
		printPendingLimit(&out, p, limit)
		assertTerminalSafe(t, out.String())
		if !strings.Contains(out.String(), "<U+202E>") || !strings.Contains(out.String(), "<U+001B>") {
			t.Errorf("limit %d: the hostile characters are not shown as <U+XXXX>:\n%.2000s", limit, out.String())
		}
	}
	// A disclosure-less confirmation goes through the argument-name guesses (leaves:).
	p.Disclosure = nil
	var out bytes.Buffer
	printPendingLimit(&out, p, 0)
	assertTerminalSafe(t, out.String())
	if !strings.Contains(out.String(), "leaves:") {
		t.Errorf("a confirmation without a disclosure shows no guessed egress:\n%.2000s", out.String())
	}
}

// TestPendingMalformedProvenanceIsShownNotPanicked: a stored provenance report is read back
// from the database; one whose host, domain, URL, e-mail or part value has no "#" in its
// path (a report written by another version, or edited in the store) is shown, never a panic
// of `airlock pending` or the approver page.
func TestPendingMalformedProvenanceIsShownNotPanicked(t *testing.T) {
	for _, kind := range []provenance.Kind{provenance.KindHost, provenance.KindDomain, provenance.KindURL, provenance.KindEmail, provenance.KindPart} {
		raw, err := json.Marshal(provenance.Report{Values: []provenance.Value{{Path: "to", Kind: kind, Text: "x", Status: provenance.StatusNotFound}}})
		if err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("kind %s without # in its path: panic %v", kind, r)
				}
			}()
			lines := provenance.Lines(raw)
			if len(lines) != 1 || lines[0].Path != "to" {
				t.Errorf("kind %s without # in its path: lines %+v, want the one value shown", kind, lines)
			}
		}()
	}
}

// TestTurnResultShowsHostileTextEscaped: a turn's result names its workflow id, which holds the
// conversation id a client app chose, and each outcome's tool name, reason and approver:
// `airlock turn` prints none of them raw.
func TestTurnResultShowsHostileTextEscaped(t *testing.T) {
	var res workflows.TurnResult
	fillStrings(reflect.ValueOf(&res).Elem(), hostileText)
	var out bytes.Buffer
	printResult(&out, res)
	assertTerminalSafe(t, out.String())
	if !strings.Contains(out.String(), "turn ok<U+001B>[2J") {
		t.Errorf("the workflow id is not shown escaped:\n%.2000s", out.String())
	}
}
