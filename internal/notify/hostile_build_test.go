package notify_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/notify"
	"github.com/airlock-dev/airlock/internal/provenance"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
)

// hiddenStrings lists every string in the JSON value v (keys and values) that display would
// alter to show: a raw control, bidi or invisible character, or bytes that are not UTF-8.
func hiddenStrings(path string, v any, out *[]string) {
	switch x := v.(type) {
	case string:
		if display.Flagged(x) {
			*out = append(*out, fmt.Sprintf("%s = %.200q", path, x))
		}
	case map[string]any:
		for k, e := range x {
			if display.Flagged(k) {
				*out = append(*out, fmt.Sprintf("%s key %q", path, k))
			}
			hiddenStrings(path+"."+k, e, out)
		}
	case []any:
		for i, e := range x {
			hiddenStrings(fmt.Sprintf("%s[%d]", path, i), e, out)
		}
	}
}

// TestNoticeCarriesNoRawHiddenCharacters: every field of a notice (what a webhook, Slack or
// e-mail shows an approver) built from a confirmation whose capability id, turn id, arguments,
// disclosure (description, side effect, destination kind and name, hosts, fields) and
// provenance are hostile holds its control, bidi and invisible characters as <U+XXXX>, never raw.
func TestNoticeCarriesNoRawHiddenCharacters(t *testing.T) {
	const bad = "x\u202eevil\u200b\x1b[2J\r\a<b>"
	disc, err := json.Marshal(registry.Disclosure{Description: bad, SideEffect: registry.SideEffect(bad), Network: registry.Network(bad),
		Destination: registry.Destination{Kind: registry.DestinationKind(bad), Name: bad},
		Hosts:       []registry.DisclosedHost{{Host: bad, Field: bad, Written: bad}, {Host: bad, Error: bad}},
		Leaving:     []registry.LeavingField{{Field: bad, Value: json.RawMessage(`"x\u202e\u001b"`)}}})
	if err != nil {
		t.Fatal(err)
	}
	prov, err := json.Marshal(provenance.Report{Values: []provenance.Value{{Path: bad, Kind: provenance.KindString, Text: "t",
		Status: provenance.StatusFound, Sources: []provenance.Source{{Kind: provenance.SourceResult, Result: 1, Capability: bad, SourceURL: "https://e.example/" + bad}}}}})
	if err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]string{bad: bad, "to": bad})
	c := store.Confirmation{ID: "cf-0001", // minted by Airlock (hex), and the channels' callback key WorkflowID: "turn/" + bad + "/1", CapabilityID: "cap." + bad, Version: 1,
		Arguments: args, Display: bad, ArgsDigest: "sha256:x", CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute),
		Disclosure: disc, Provenance: prov}
	n := notify.Build(c, notify.KindPending, "hook", "https://airlock.example/")
	b, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	var found []string
	hiddenStrings("notice", v, &found)
	if len(found) > 0 {
		t.Fatalf("the notice carries raw hidden characters:\n%s", strings.Join(found, "\n"))
	}
}
