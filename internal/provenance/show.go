package provenance

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Line is one argument value's origin as every approver surface shows it (issue 24 item 2):
// the value's path, its origin label, and whether it came only from untrusted data (the mark
// that makes it stand out). Label holds tool-written text (a source URL, a call's argument):
// surfaces show it through internal/display.
type Line struct {
	Path      string `json:"path"`
	Label     string `json:"label"`
	Untrusted bool   `json:"untrusted_only"`
	// Unattributed: not found anywhere, or too short to tell.
	Unattributed bool `json:"unattributed"`
	// Origin is the value's origin in the words policies read (Value.Origin: user,
	// untrusted, both, none); "" for the "provenance unavailable" line.
	Origin string `json:"origin,omitempty"`
	// Warning is the principal's sentence warning against the value ("" when none): the
	// label says it too (issue 37 item 3).
	Warning string `json:"warning,omitempty"`
}

// Lines reads a stored report (Confirmation.Provenance) into what surfaces print: one line a
// leaf value, plus a URL's host or an e-mail's domain when its origin differs from the whole
// value's. An empty report gives no lines and no error (confirmations issued before
// provenance existed); a report that says it could not be computed, or that is not a report,
// gives one line saying "provenance unavailable" and why: never silence.
func Lines(raw json.RawMessage) []Line {
	if len(raw) == 0 {
		return nil
	}
	var r Report
	if err := json.Unmarshal(raw, &r); err != nil {
		return []Line{{Path: "", Label: fmt.Sprintf("provenance unavailable: stored report unreadable (%v)", err), Unattributed: true}}
	}
	if r.Error != "" {
		return []Line{{Path: "", Label: "provenance unavailable: " + r.Error, Unattributed: true}}
	}
	var out []Line
	parent := map[string]string{}
	for _, v := range r.Values {
		l := Line{Path: v.Path, Label: v.Label(), Untrusted: v.UntrustedOnly(), Unattributed: v.Status != StatusFound, Origin: v.Origin()}
		l.Warning, _ = v.Warned()
		switch v.Kind {
		case KindHost, KindDomain:
			if base, ok := wholeValue(v.Path); ok && parent[base] == l.Label {
				continue
			}
		case KindURL, KindEmail, KindPart:
			parent[v.Path] = l.Label
			if base, ok := wholeValue(v.Path); ok && parent[base] == l.Label {
				continue // a link inside text the user wrote, from the user too
			}
		default:
			parent[v.Path] = l.Label
		}
		out = append(out, l)
	}
	return out
}

// wholeValue is the path of the leaf a part value ("to#host", "body#url0") was found in, and
// false for a path without "#": a stored report is read back from the database, and one
// written otherwise (another version, an edited row) is shown line by line, never a panic.
func wholeValue(path string) (string, bool) {
	i := strings.LastIndexByte(path, '#')
	if i < 0 {
		return "", false
	}
	return path[:i], true
}

// MarksUntrusted reports whether the stored report raw marks injected, a value known to come
// from an injection (the evaluation's attacker values), as found only in untrusted data: some
// value of the report that holds it (exactly, or written inside it) is UntrustedOnly. ok is
// false when raw is not a readable, computed report.
func MarksUntrusted(raw json.RawMessage, injected string) (marked, ok bool) {
	var r Report
	if len(raw) == 0 || json.Unmarshal(raw, &r) != nil || r.Error != "" {
		return false, false
	}
	want := normalize(injected)
	for _, v := range r.Values {
		inside := v.Kind == KindPart && strings.Contains(want, v.Text) // a dictated sentence of it
		if v.UntrustedOnly() && (v.Text == want || strings.Contains(v.Text, want) || strings.EqualFold(v.Text, want) || inside) {
			return true, true
		}
	}
	return false, true
}
