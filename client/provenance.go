package client

import "github.com/airlock-dev/airlock/internal/provenance"

// Origin is where one argument value of a pending confirmation came from, as Airlock's worker
// computed it from the turn's stored context when it asked for the decision (issue 24; never
// from anything the model said): Path is the value's JSON pointer ("/recipient", or
// "/url#host" for a URL's host), Label the approver-facing origin ("from your message",
// "from <capability> result #n (<source>)", "not found in the conversation", "too short to
// attribute", or "provenance unavailable: …"). Label holds tool-written text: show it with
// Visible or Text.
type Origin struct {
	Path  string `json:"path"`
	Label string `json:"label"`
	// UntrustedOnly marks a value found only in capability results: the mark of a value a
	// prompt injection could have planted. Show it so that it stands out.
	UntrustedOnly bool `json:"untrusted_only"`
	// Unattributed: found nowhere, too short to tell, or provenance unavailable.
	Unattributed bool `json:"unattributed"`
}

// Origins reads p.Provenance into one Origin a value (none for confirmations issued before
// provenance existed; one "provenance unavailable" entry when it could not be computed).
func Origins(p PendingConfirmation) []Origin {
	var out []Origin
	for _, l := range provenance.Lines(p.Provenance) {
		out = append(out, Origin{Path: l.Path, Label: l.Label, UntrustedOnly: l.Untrusted, Unattributed: l.Unattributed})
	}
	return out
}
