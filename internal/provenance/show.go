package provenance

import (
	"encoding/json"
	"fmt"
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
		l := Line{Path: v.Path, Label: v.Label(), Untrusted: v.UntrustedOnly(), Unattributed: v.Status != StatusFound}
		if v.Kind == KindHost || v.Kind == KindDomain {
			base := v.Path[:len(v.Path)-len("#"+string(v.Kind))]
			if parent[base] == l.Label {
				continue
			}
		} else {
			parent[v.Path] = l.Label
		}
		out = append(out, l)
	}
	return out
}
