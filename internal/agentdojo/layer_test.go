package agentdojo

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/airlock-dev/airlock/registry"
)

// The embedded layers are what Layer generates from tools.json: one classification, not two.
func TestEmbeddedLayersEqualGenerated(t *testing.T) {
	tools, err := LoadTools(corpus(t, "tools.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, suite := range []string{"banking", "slack", "travel", "workspace"} {
		emb, err := registry.Layer("agentdojo-" + suite)
		if err != nil {
			t.Fatal(err)
		}
		want, err := registry.Entries(emb)
		if err != nil {
			t.Fatal(err)
		}
		gen, err := Layer(suite, tools[suite])
		if err != nil {
			t.Fatal(err)
		}
		got, err := registry.Entries(gen)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: generated %d entries, embedded %d", suite, len(got), len(want))
		}
		byID := map[string]registry.Entry{}
		for _, e := range want {
			byID[e.ID] = e
		}
		for _, g := range got {
			w, ok := byID[g.ID]
			if !ok {
				t.Errorf("%s: generated %s is not embedded", suite, g.ID)
				continue
			}
			if !reflect.DeepEqual(g, w) {
				gj, _ := json.Marshal(g)
				wj, _ := json.Marshal(w)
				t.Errorf("%s: %s differs\n generated %s\n  embedded %s", suite, g.ID, gj, wj)
			}
		}
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		suite, tool string
		want        bool // consequential
	}{
		{"banking", "send_money", true},
		{"banking", "update_password", true},
		{"banking", "get_balance", false},
		{"banking", "read_file", false},
		{"workspace", "share_file", true},
		{"workspace", "add_calendar_event_participants", true},
		{"workspace", "search_files_by_filename", false},
		{"slack", "get_webpage", true}, // read-only but external: never automatic
		{"slack", "send_direct_message", true},
		{"slack", "read_channel_messages", false},
		{"travel", "reserve_hotel", true},
		{"travel", "get_rating_reviews_for_hotels", false},
		{"newsuite", "get_weather", false},
		{"newsuite", "frobnicate", true}, // unknown shape: fail closed
		{"banking", "getaway", true},     // the prefix is get_, not get
	}
	for _, c := range cases {
		if got := Consequential(c.suite, c.tool); got != c.want {
			t.Errorf("Consequential(%s, %s) = %v, want %v", c.suite, c.tool, got, c.want)
		}
	}
	if se, net := Classify("slack", "get_webpage"); se != registry.SideEffectNone || net != registry.NetworkExternal {
		t.Errorf("slack get_webpage = %s/%s, want none/external", se, net)
	}
}

func TestLayerRefusesBadSuite(t *testing.T) {
	for _, s := range []string{"", "../x", "a.b"} {
		if _, err := Layer(s, []Tool{{Name: "get_x", Parameters: json.RawMessage(`{}`)}}); err == nil {
			t.Errorf("Layer(%q) accepted", s)
		}
	}
}
