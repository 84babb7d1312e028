package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/airlock-dev/airlock/registry"
)

// Capability ids and tool names of the bench layer.
const (
	// LookupID is the automatic, read-only lookup every round proposes (tool ToolLookup).
	LookupID   = "bench.lookup"
	ToolLookup = "lookup"
	// LookupConfirmedID is the same lookup behind a human confirmation: the approval variant's
	// round-2 call (tool ToolLookupConfirmed).
	LookupConfirmedID   = "bench.lookup-confirmed"
	ToolLookupConfirmed = "lookup_confirmed"
)

// layerDoc is the bench registry layer: two capabilities, loaded only by the bench worker.
const layerDoc = `{
  "schema/v": "capability-registry.v1",
  "revision": "bench.1",
  "entries": [
    {
      "capability/id": "bench.lookup",
      "version": 1,
      "owner": "airlock bench",
      "surfaces": ["host-local"],
      "wire/name": "app/bench.lookup",
      "status": "active",
      "flags": {"dispatchable": true, "advertisable": false, "passport/eligible": false,
        "signing-domain": false, "host-route": true, "federated-discovery": false},
      "airlock": {
        "tool/name": "lookup",
        "description": "Look up the value stored under a key (benchmark workload).",
        "side-effect": "none",
        "network": "local",
        "per-turn/cap": 4,
        "timeout": "10s",
        "model-visible": true
      }
    },
    {
      "capability/id": "bench.lookup-confirmed",
      "version": 1,
      "owner": "airlock bench",
      "surfaces": ["host-local"],
      "wire/name": "app/bench.lookup-confirmed",
      "status": "active",
      "flags": {"dispatchable": true, "advertisable": false, "passport/eligible": false,
        "signing-domain": false, "host-route": true, "federated-discovery": false},
      "airlock": {
        "tool/name": "lookup_confirmed",
        "description": "Look up the value stored under a key, after a human confirms it (benchmark workload).",
        "side-effect": "none",
        "network": "local",
        "per-turn/cap": 4,
        "timeout": "10s",
        "model-visible": true
      }
    }
  ]
}`

// policyDoc is the bench layer's policy sidecar: lookup runs automatically, lookup_confirmed
// waits for an approver other than the turn's principal.
const policyDoc = `{
  "schema/v": "capability-authorization-policy.v1",
  "revision": "bench.policy.1",
  "grants": ["bench.read"],
  "principals": [{"principal": "*", "grants": ["bench.read"]}],
  "capabilities": [
    {"capability/id": "bench.lookup", "version": 1, "grants/required": ["bench.read"],
      "autonomy": "automatic", "approval/distinct-approver": false},
    {"capability/id": "bench.lookup-confirmed", "version": 1, "grants/required": ["bench.read"],
      "autonomy": "confirm", "approval/distinct-approver": true}
  ]
}`

// Sources are the bench layer and its policy, to load after the base registry.
func Sources() []registry.Source {
	return []registry.Source{
		{Name: "bench layer", Data: []byte(layerDoc)},
		{Name: "policy of the bench layer", Data: []byte(policyDoc)},
	}
}

// LookupArgs are the arguments of both lookups.
type LookupArgs struct {
	// Key is the key to look up: k<n> holds v<n>.
	Key string `json:"key" validate:"required,max=64" jsonschema:"description=The key to look up,maxLength=64"`
}

// Implementations serve the bench layer: key k<n> has the value v<n>; any other key is a
// capability-level error returned as data.
func Implementations() []registry.Implementation {
	lookup := func(_ context.Context, a *LookupArgs, _ registry.Invocation) (registry.Output, error) {
		n, ok := strings.CutPrefix(a.Key, "k")
		if !ok || n == "" {
			return registry.Output{Data: json.RawMessage(`null`), Error: fmt.Sprintf("no value under key %q", a.Key)}, nil
		}
		data, err := json.Marshal(map[string]string{"value": "v" + n})
		if err != nil {
			return registry.Output{}, fmt.Errorf("bench: lookup: %w", err)
		}
		return registry.Output{Data: data}, nil
	}
	ready := func(context.Context) error { return nil }
	a := registry.Typed(LookupID, 1, lookup)
	b := registry.Typed(LookupConfirmedID, 1, lookup)
	a.Ready, b.Ready = ready, ready
	return []registry.Implementation{a, b}
}
