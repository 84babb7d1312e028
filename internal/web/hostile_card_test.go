package web

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/provenance"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
)

// TestHostileDisclosureAndProvenanceAreEscaped: every word of a stored disclosure (the
// registry's description, side effect, network, destination kind and name, host fields) and of
// a stored provenance report (paths, source capability and URL) reaches the card with its
// bidi, invisible and control characters shown as <U+XXXX> and its HTML escaped; a report
// whose host value has no "#" in its path is shown, not a failed page.
func TestHostileDisclosureAndProvenanceAreEscaped(t *testing.T) {
	e := newEnv(t)
	const bad = "x\u202eevil\u200b\x1b[2J<script>alert(1)</script>"
	d := registry.Disclosure{Description: bad, SideEffect: registry.SideEffect(bad), Network: registry.Network(bad),
		Destination: registry.Destination{Kind: registry.DestinationKind(bad), Name: bad},
		Hosts:       []registry.DisclosedHost{{Host: bad, Field: bad, Written: bad}},
		Leaving:     []registry.LeavingField{{Field: bad, Value: json.RawMessage(`"` + "x\\u202e<b>" + `"`)}}}
	disc, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	prov, err := json.Marshal(provenance.Report{Values: []provenance.Value{
		{Path: bad, Kind: provenance.KindString, Text: "t", Status: provenance.StatusFound,
			Sources: []provenance.Source{{Kind: provenance.SourceResult, Result: 1, Capability: bad, SourceURL: "https://e.example/" + bad}}},
		{Path: "nohash", Kind: provenance.KindHost, Text: "t", Status: provenance.StatusNotFound}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.CreateConfirmation(context.Background(), store.Confirmation{ID: "cf-h", TokenHash: []byte("h-cf-h"), WorkflowID: "turn/h/1", RunID: "r",
		Seq: 1, CallID: "call-h", CapabilityID: "test.cap", Version: 1, ArgsDigest: "sha256:h", Arguments: json.RawMessage(`{"a":"b"}`),
		Display: "tool {}", ExpiresAt: e.now.Add(time.Minute), Disclosure: disc, Provenance: prov}); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.login("alice", "correct horse")
	resp, page := b.get("/")
	if resp.StatusCode != 200 {
		t.Fatalf("GET / = %d", resp.StatusCode)
	}
	for _, raw := range []string{"\u202e", "\u200b", "\x1b", "<script>alert", "<b>"} {
		if strings.Contains(page, raw) {
			i := strings.Index(page, raw)
			t.Errorf("the card holds %q raw: …%s…", raw, page[max(0, i-200):min(len(page), i+50)])
		}
	}
	for _, want := range []string{"&lt;U&#43;202E&gt;", "&lt;U&#43;001B&gt;", "nohash", "side-effect"} {
		if !strings.Contains(page, want) {
			t.Errorf("the card lacks %q", want)
		}
	}
}
