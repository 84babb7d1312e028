package provenance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/airlock-dev/airlock/internal/inference"
)

// envelope is the part of the executor's untrusted-data envelope (activities.Envelope) that
// provenance reads; decoded here so this package does not import the activities.
type envelope struct {
	Airlock    string          `json:"airlock"`
	Trust      string          `json:"trust"`
	Capability string          `json:"capability"`
	CallID     string          `json:"call_id"`
	SourceURL  string          `json:"source_url"`
	Data       json.RawMessage `json:"data"`
}

// FromContext turns the context a turn sent to the model, and the catalog it offered, into the
// entries Compute searches: user, system and assistant prose as written; each tool message's
// untrusted data (every string and number leaf, and its source URL) as one result entry;
// Airlock's own verdicts and the arguments of earlier calls not at all (they are the model's
// own words). A tool message that is not an envelope is searched whole as an untrusted result
// with capability "unknown" (fail safe: text of unknown origin never counts as the user's).
func FromContext(msgs []inference.Message, catalog []inference.Tool) []Entry {
	var out []Entry
	calls := map[string]string{} // call id → the call's arguments, to name a result's source
	for _, m := range msgs {
		for _, tc := range m.ToolCalls {
			calls[tc.ID] = tc.Arguments
		}
	}
	for _, t := range catalog {
		out = append(out, Entry{Kind: SourceCatalog, Text: t.Name + "\n" + t.Description})
	}
	for _, m := range msgs {
		switch m.Role {
		case inference.RoleUser:
			out = append(out, Entry{Kind: SourceUser, Text: m.Content})
		case inference.RoleSystem:
			out = append(out, Entry{Kind: SourceSystem, Text: m.Content})
		case inference.RoleAssistant:
			if m.Content != "" {
				out = append(out, Entry{Kind: SourceAssistant, Text: m.Content})
			}
		case inference.RoleTool:
			var e envelope
			if err := json.Unmarshal([]byte(m.Content), &e); err != nil || e.Airlock != "tool_result" {
				out = append(out, Entry{Kind: SourceResult, Text: m.Content, Capability: "unknown", CallID: m.ToolCallID})
				continue
			}
			if e.Trust != "untrusted" {
				continue
			}
			src := e.SourceURL
			if src == "" {
				src = callSource(calls[m.ToolCallID])
			}
			out = append(out, Entry{Kind: SourceResult, Text: resultText(e), Capability: e.Capability, CallID: e.CallID, SourceURL: src})
		}
	}
	return out
}

// resultText is every key, string and number leaf of a result's data after its source URL,
// each ended by a NUL byte, which normalisation keeps: a value never matches across two leaves.
func resultText(e envelope) string {
	var b strings.Builder
	if e.SourceURL != "" {
		b.WriteString(e.SourceURL)
		b.WriteByte(0)
	}
	if len(e.Data) == 0 {
		return b.String()
	}
	dec := json.NewDecoder(strings.NewReader(string(e.Data)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		b.Write(e.Data) // not JSON: search it as text
		return b.String()
	}
	var leaves func(any)
	leaves = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, x := range t { // order does not matter: every leaf stands alone
				b.WriteString(k)
				b.WriteByte(0)
				leaves(x)
			}
		case []any:
			for _, x := range t {
				leaves(x)
			}
		case json.Number:
			b.WriteString(t.String())
			b.WriteByte(0)
		case string:
			b.WriteString(t)
			b.WriteByte(0)
		}
	}
	leaves(v)
	return b.String()
}

// callSource names where a result without a source URL came from by the call's arguments:
// its one string argument ("bill-december-2023.txt"), its one scalar argument as key=value
// ("n=100"), else its arguments as compact JSON cut to 80 bytes. These are the model's
// words, shown as such (through internal/display).
func callSource(args string) string {
	if args == "" {
		return ""
	}
	dec := json.NewDecoder(strings.NewReader(args))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) == nil && len(m) == 1 {
		for k, v := range m {
			switch t := v.(type) {
			case string:
				return t
			case json.Number:
				return k + "=" + t.String()
			case bool:
				return fmt.Sprintf("%s=%v", k, t)
			}
		}
	}
	var b bytes.Buffer
	if json.Compact(&b, []byte(args)) == nil {
		args = b.String()
	}
	if len(args) > 80 {
		return strings.ToValidUTF8(args[:80], "") + "…"
	}
	return args
}
