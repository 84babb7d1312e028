package registry

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ExternalReadCap, ExternalWriteCap and ExternalTimeout are defaults of an external entry (issue 34, item 5): an entry with an http or mcp block is
// served from its declaration, so the fields only built-in capabilities use may be left out of
// it and read as the defaults below. What matters to an external capability stays required: its id,
// version and owner, tool name, description, side effect, network and destination.
//
//   - surfaces ["host-local"], flags {dispatchable, host-route} (P072's eligibility for a
//     capability this host dispatches itself; surfaces derive from the flags);
//   - wire/name "app/" + the capability id (characters the wire pattern does not allow
//     become "-"), with ".v<N>" after it from version 2 on;
//   - status "active";
//   - per-turn/cap ExternalReadCap for a read (side-effect none), ExternalWriteCap otherwise;
//   - timeout ExternalTimeout; model-visible true.
//
// A field written in the entry is kept as written, whatever its value.
const (
	ExternalReadCap  = 10
	ExternalWriteCap = 3
	ExternalTimeout  = "30s"
)

// applyExternalDefaults fills the fields an external entry of document b left out (see
// ExternalDefaults above); presence is read from b itself, so an explicit false or 0 stays.
func applyExternalDefaults(b []byte, doc *Document) error {
	var raw struct {
		Entries []map[string]json.RawMessage `json:"entries"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("malformed JSON: %w", err)
	}
	if len(raw.Entries) != len(doc.Entries) {
		return nil // cannot happen for a document that decoded; nothing is guessed
	}
	for i, m := range raw.Entries {
		e := &doc.Entries[i]
		if e.Airlock.HTTP == nil && e.Airlock.MCP == nil {
			continue
		}
		if _, ok := m["flags"]; !ok {
			e.Flags = Flags{Dispatchable: true, HostRoute: true}
		}
		if _, ok := m["surfaces"]; !ok {
			e.Surfaces = []Surface{SurfaceHostLocal}
		}
		if _, ok := m["wire/name"]; !ok {
			e.WireName = "app/" + wireSafe(e.ID)
			if e.Version > 1 {
				e.WireName += fmt.Sprintf(".v%d", e.Version) // versions of one id are registered side by side
			}
		}
		if _, ok := m["status"]; !ok {
			e.Status = StatusActive
		}
		var a map[string]json.RawMessage
		if err := json.Unmarshal(m["airlock"], &a); err != nil {
			return fmt.Errorf("malformed JSON: airlock of entry %d: %w", i, err)
		}
		if _, ok := a["per-turn/cap"]; !ok {
			e.Airlock.PerTurnCap = ExternalWriteCap
			if e.ReadOnly() {
				e.Airlock.PerTurnCap = ExternalReadCap
			}
		}
		if _, ok := a["timeout"]; !ok {
			e.Airlock.Timeout = ExternalTimeout
		}
		if _, ok := a["model-visible"]; !ok {
			e.Airlock.ModelVisible = true
		}
	}
	return nil
}

// wireSafe maps a capability id onto the wire/name pattern's alphabet ([a-z0-9._-]).
func wireSafe(id string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		}
		return '-'
	}, id)
}
