package cedarpolicy

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ArgType is the Cedar type an argument field is given in a request's context.args.
type ArgType string

// Argument types. JSON Schema "string" is String, "integer" and "number" are Long (a
// fractional number is rounded up, away from zero, so "amount > 1000" holds for 1000.01),
// "boolean" is Bool, an array of strings or numbers is Set<String> or Set<Long>. Other
// shapes (objects, arrays of objects) are not exposed to policies.
const (
	TypeString    ArgType = "String"
	TypeLong      ArgType = "Long"
	TypeBool      ArgType = "Bool"
	TypeSetString ArgType = "Set<String>"
	TypeSetLong   ArgType = "Set<Long>"
)

// Arg is one top-level argument field of a capability as policies see it.
type Arg struct {
	Name string
	Type ArgType
	// Required: the capability's schema requires the field (stage 2 checked it before the
	// policy runs), so policies read it without a `has` test.
	Required bool
}

// Action describes one capability for the generated schema: its id (the Cedar action
// Action::"<capability/id>"), its typed arguments and the fields whose values leave the
// machine (the registry's destination fields).
type Action struct {
	ID   string
	Args []Arg
	// Fields are every top-level argument field (exposed or not), sorted: each has an origin
	// in context.provenance.
	Fields []string
	// Leaving are the fields whose values leave the machine (destination fields).
	Leaving []string
	// Class is the action group the capability is in, from the registry's classes.
	Class Class
}

// Class is an action group of the generated schema, so a policy can speak of every read or
// every write at once (`action in Action::"read"`): "local-read" (side effect none, network
// local) and "external-read" (side effect none, reaches the network) are both in "read";
// "write" is every capability with a side effect.
type Class string

// Action groups.
const (
	ClassRead         Class = "read"
	ClassLocalRead    Class = "local-read"
	ClassExternalRead Class = "external-read"
	ClassWrite        Class = "write"
)

// NewAction builds the Action of capability id from its JSON Schema and destination fields.
// Errors: a schema that is not JSON.
func NewAction(id string, class Class, schema []byte, leaving []string) (Action, error) {
	args, fields, err := ArgsFromJSONSchema(schema)
	if err != nil {
		return Action{}, fmt.Errorf("cedarpolicy: %s: %w", id, err)
	}
	return Action{ID: id, Args: args, Fields: fields, Leaving: slices.Clone(leaving), Class: class}, nil
}

// ArgsFromJSONSchema reads the top-level properties of a capability's JSON Schema (an
// object schema) into Args, sorted by name; properties of a shape Cedar is not given are
// left out of args but listed in fields (every property name, sorted). Errors: a schema that
// is not JSON.
func ArgsFromJSONSchema(schema []byte) (args []Arg, fields []string, err error) {
	if len(schema) == 0 {
		return nil, nil, nil
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, nil, fmt.Errorf("cedarpolicy: argument schema: %w", err)
	}
	var out []Arg
	for name, raw := range s.Properties {
		fields = append(fields, name)
		t, nullable := propType(raw)
		if t == "" {
			continue
		}
		out = append(out, Arg{Name: name, Type: t, Required: slices.Contains(s.Required, name) && !nullable})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	sort.Strings(fields)
	return out, fields, nil
}

type jsonProp struct {
	Type  json.RawMessage `json:"type"`
	Items *jsonProp       `json:"items"`
	AnyOf []jsonProp      `json:"anyOf"`
}

// propType maps one property schema to its Cedar type ("" when not exposed); nullable
// reports a type list or anyOf that admits null.
func propType(raw json.RawMessage) (ArgType, bool) {
	var p jsonProp
	if json.Unmarshal(raw, &p) != nil {
		return "", false
	}
	return p.cedar()
}

func (p jsonProp) types() []string {
	var one string
	if json.Unmarshal(p.Type, &one) == nil && one != "" {
		return []string{one}
	}
	var many []string
	_ = json.Unmarshal(p.Type, &many)
	return many
}

func (p jsonProp) cedar() (ArgType, bool) {
	nullable := false
	var found []ArgType
	add := func(q jsonProp) {
		for _, t := range q.types() {
			switch t {
			case "null":
				nullable = true
			case "string":
				found = append(found, TypeString)
			case "integer", "number":
				found = append(found, TypeLong)
			case "boolean":
				found = append(found, TypeBool)
			case "array":
				if q.Items == nil {
					found = append(found, "")
					continue
				}
				switch it, _ := q.Items.cedar(); it {
				case TypeString:
					found = append(found, TypeSetString)
				case TypeLong:
					found = append(found, TypeSetLong)
				default:
					found = append(found, "")
				}
			default:
				found = append(found, "")
			}
		}
	}
	add(p)
	for _, q := range p.AnyOf {
		add(q)
	}
	if len(found) != 1 {
		return "", nullable // no type, or a union Cedar has no single type for
	}
	return found[0], nullable
}

// Origins are the values of context.provenance.<field> and context.destination.origin: where
// a field's values were found (internal/provenance, issue 37 item 3). OriginUser: typed by
// the principal (and in no untrusted data); OriginUntrusted: in untrusted data (capability
// results) and not typed by the principal as an instruction; OriginBoth: typed by the
// principal and also present in untrusted data; OriginNone: nowhere (the model produced it),
// too short to attribute, or the field is absent.
const (
	OriginUser      = "user"
	OriginUntrusted = "untrusted"
	OriginBoth      = "both"
	OriginNone      = "none"
)

// Entity types of the generated schema.
const (
	EntityUser        = "User"
	EntityGroup       = "Group"
	EntityDestination = "Destination"
)

// Schema writes the Cedar schema (human-readable form) for actions: one action per
// capability, principal User (member of Groups), resource Destination, and a context of
// args (typed arguments), provenance (one origin per argument field), destination (hosts and
// e-mail domains of the leaving values, their combined origin) and turn facts.
func Schema(actions []Action) string {
	var b strings.Builder
	b.WriteString("// Generated by Airlock from the registry: do not edit.\n")
	b.WriteString("entity " + EntityGroup + ";\n")
	b.WriteString("entity " + EntityUser + " in [" + EntityGroup + "];\n")
	b.WriteString("entity " + EntityDestination + " { kind: String };\n")
	b.WriteString("type Turn = { principal: String, calls: Long, hour: Long, weekday: Long, unix: Long };\n")
	b.WriteString("type Leaving = { hosts: Set<String>, domains: Set<String>, origin: String };\n")
	fmt.Fprintf(&b, "action %q;\naction %q in [%q];\naction %q in [%q];\naction %q;\n", ClassRead, ClassLocalRead, ClassRead, ClassExternalRead, ClassRead, ClassWrite)
	sorted := slices.Clone(actions)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })
	for _, a := range sorted {
		class := a.Class
		if class == "" {
			class = ClassWrite
		}
		fmt.Fprintf(&b, "action %s in [%q] appliesTo {\n  principal: [%s],\n  resource: [%s],\n  context: {\n", strconv.Quote(a.ID), class, EntityUser, EntityDestination)
		b.WriteString("    args: {")
		for i, arg := range a.Args {
			if i > 0 {
				b.WriteString(",")
			}
			opt := "?"
			if arg.Required {
				opt = ""
			}
			fmt.Fprintf(&b, " %s%s: %s", strconv.Quote(arg.Name), opt, arg.Type)
		}
		b.WriteString(" },\n    provenance: {")
		for i, f := range a.Fields {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, " %s: String", strconv.Quote(f))
		}
		b.WriteString(" },\n    destination: Leaving,\n    turn: Turn\n  }\n};\n")
	}
	return b.String()
}
