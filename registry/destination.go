package registry

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/internal/display"
)

// DestinationKind says what kind of party a capability's call reaches (issue 19, item 4:
// "what leaves the machine is declared, not guessed").
type DestinationKind string

// Destination kinds.
const (
	// DestinationHost: a network host, named by its host name in the form the HTTP client
	// resolves (lower-case ASCII, IDNA labels as xn--), or "*" for "the host of the URL in the
	// declared fields" (web.fetch: any public host the arguments name).
	DestinationHost DestinationKind = "host"
	// DestinationServer: an MCP server, named as the registry's MCP block names it.
	DestinationServer DestinationKind = "server"
	// DestinationSystem: another system reached some other way (a replayed environment, a
	// local store), named for people.
	DestinationSystem DestinationKind = "system"
	// DestinationNone: nothing leaves the machine. Only for capabilities that are read-only
	// and local (side-effect none, network local).
	DestinationNone DestinationKind = "none"
)

// AnyHost is the Destination name of a host destination taken from the arguments: the host of
// the URL each declared field holds (web.fetch).
const AnyHost = "*"

// Destination is the registry's declaration of where a capability sends what: the kind of
// party, its name and the top-level argument fields whose values leave the machine. It is the
// "destination" object of an entry's airlock block:
//
//	"destination": {"kind": "host" | "server" | "system" | "none", "name": "…", "fields": ["…"]}
//
// Every approver surface shows it with the capability's description and side effect. An
// external capability (network external, or side-effect external-write) without one is refused
// at load (RuleDestinationDeclared); the shape is checked by RuleDestination and the fields
// against the argument schema by RuleDestinationFields.
type Destination struct {
	Kind DestinationKind `json:"kind"`
	// Name is the host name (DestinationHost), MCP server name (DestinationServer) or system
	// name (DestinationSystem); empty for DestinationNone.
	Name string `json:"name,omitempty"`
	// Fields are the top-level argument fields whose values are sent to the destination, in
	// the registry's order (empty: none of the arguments leaves, for example a GET with none).
	Fields []string `json:"fields,omitempty"`
	// Internal declares the destination an internal service of the organization (issue 34,
	// item 5): a named host (never AnyHost) that an HTTP entry reaches only at non-public
	// addresses the fetch allow-list admits (the worker refuses a public address at dial
	// time). A read-only capability (side-effect none) whose destination is internal may run
	// without a human (Entry.Automatic): what it sends stays inside the organization, with the
	// service the registry names. Allowed only on kind host with an http block whose URL is
	// that host (RuleDestination).
	Internal bool `json:"internal,omitempty"`
}

// InternalRead reports whether the entry is a read of a named internal service: side-effect
// none, an http block whose method is GET (a read by HTTP's own definition: a POST, PUT, PATCH
// or DELETE is refused with internal at load), and a destination declared internal
// (Destination.Internal).
func (e Entry) InternalRead() bool {
	d := e.Airlock.Destination
	return e.ReadOnly() && e.Airlock.HTTP != nil && e.Airlock.HTTP.Method == http.MethodGet &&
		d != nil && d.Internal && d.Kind == DestinationHost && d.Name != AnyHost
}

// External reports whether the entry reaches outside the machine by its classes (network
// external, or an external write): such an entry must declare its destination.
func (e Entry) External() bool {
	return e.Airlock.Network == NetworkExternal || e.Airlock.SideEffect == SideEffectExternalWrite
}

// DestinationOf is the entry's declared destination, or kind none when it declares none
// (allowed only for entries that are not External).
func (e Entry) DestinationOf() Destination {
	if e.Airlock.Destination != nil {
		return *e.Airlock.Destination
	}
	return Destination{Kind: DestinationNone}
}

// checkDestination runs the destination rules that need only the entry (its argument schema
// is checked at bind, checkDestinationFields).
func checkDestination(src string, e Entry) []Diagnostic {
	var p []Diagnostic
	bad := func(rule Rule, format string, a ...any) {
		p = append(p, Diagnostic{Source: src, Entry: e.Key(), Rule: rule, Message: fmt.Sprintf(format, a...)})
	}
	d := e.Airlock.Destination
	if d == nil {
		if e.External() && e.Airlock.Kind != KindProposal {
			bad(RuleDestinationDeclared, "an external capability (network %s, side-effect %s) declares no destination: add \"destination\": {\"kind\", \"name\", \"fields\"} to its airlock block", e.Airlock.Network, e.Airlock.SideEffect)
		}
		return p
	}
	switch d.Kind {
	case DestinationNone:
		if e.Airlock.SideEffect != SideEffectNone || e.Airlock.Network != NetworkLocal {
			bad(RuleDestination, "destination kind none (nothing leaves the machine) is only for side-effect none and network local, not %s/%s", e.Airlock.SideEffect, e.Airlock.Network)
		}
		if d.Name != "" || len(d.Fields) > 0 {
			bad(RuleDestination, "destination kind none names no party and no fields")
		}
	case DestinationHost:
		switch {
		case d.Name == AnyHost:
			if len(d.Fields) == 0 {
				bad(RuleDestination, "destination host %q (the host of a URL argument) needs the fields holding that URL", AnyHost)
			}
		default:
			h, err := display.DialHost(d.Name)
			switch {
			case err != nil:
				bad(RuleDestination, "destination host %s is not a host name the HTTP client can resolve: %v", quoteVisible(d.Name), err)
			case h != d.Name:
				bad(RuleDestination, "destination host %s is resolved as %s: write the host in the form that is contacted", quoteVisible(d.Name), quoteVisible(h))
			}
		}
	case DestinationServer, DestinationSystem:
		if strings.TrimSpace(d.Name) == "" {
			bad(RuleDestination, "destination kind %s needs a name", d.Kind)
		} else if display.Flagged(d.Name) {
			bad(RuleDestination, "destination name %s holds hidden, control or bidirectional characters", quoteVisible(d.Name))
		}
	default:
		bad(RuleDestination, "destination kind %q is not host, server, system or none", d.Kind)
	}
	if d.Internal {
		switch {
		case d.Kind != DestinationHost || d.Name == AnyHost:
			bad(RuleDestination, "destination internal is only for a named host (kind host, not %q): the worker checks the address it dials against it", AnyHost)
		case e.Airlock.HTTP == nil:
			bad(RuleDestination, "destination internal needs an http block: only Airlock's own HTTP client can hold the call to non-public addresses")
		case e.ReadOnly() && e.Airlock.HTTP.Method != http.MethodGet:
			// Side-effect none on an internal destination makes a call automatic: only a GET
			// may claim it (a DELETE declared "none" would run without a human, and be retried).
			bad(RuleDestination, "destination internal with side-effect none is a read, and a read is a GET: method %s changes something, so declare its side effect (local-write or external-write) and it will ask", e.Airlock.HTTP.Method)
		}
	}
	seen := map[string]bool{}
	for _, f := range d.Fields {
		if seen[f] {
			bad(RuleDestination, "destination field %s is listed twice", quoteVisible(f))
		}
		seen[f] = true
	}
	return p
}

// checkDestinationFields checks that every declared field is an argument the capability can
// receive: a top-level property of the bound argument schema, or any name when the schema
// leaves additional properties open (a field it never receives cannot be what leaves).
func (c *Capability) checkDestinationFields() error {
	d := c.Airlock.Destination
	if d == nil || len(d.Fields) == 0 {
		return nil
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Additional json.RawMessage            `json:"additionalProperties"`
	}
	if err := json.Unmarshal(c.Schema, &s); err != nil {
		return fmt.Errorf("argument schema is not an object schema: %w", err)
	}
	if a := strings.TrimSpace(string(s.Additional)); a == "" || a == "true" {
		return nil // open: any top-level field may be given
	}
	var missing []string
	for _, f := range d.Fields {
		if _, ok := s.Properties[f]; !ok {
			missing = append(missing, quoteVisible(f))
		}
	}
	if len(missing) > 0 {
		have := make([]string, 0, len(s.Properties))
		for k := range s.Properties {
			have = append(have, k)
		}
		slices.Sort(have)
		return fmt.Errorf("destination fields %s are not top-level arguments of the capability (it takes: %s)", strings.Join(missing, ", "), strings.Join(have, ", "))
	}
	return nil
}

// quoteVisible quotes s for a diagnostic with hidden characters made visible.
func quoteVisible(s string) string { return `"` + display.Visible(s) + `"` }

// ArgumentFields lists the top-level property names of a JSON Schema object (sorted): the
// fields a generated destination declares as leaving when all of a tool's arguments are sent.
// A schema that is not an object with properties gives none.
func ArgumentFields(schema json.RawMessage) []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	out := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
