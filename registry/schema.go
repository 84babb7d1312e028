package registry

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	jsv "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// RegistrySchema is the JSON Schema of capability-registry.v1, the first gate every registry
// document passes (shape only: schema validity never implies registration).
//
//go:embed capability-registry.v1.schema.json
var RegistrySchema []byte

// PolicySchema is the JSON Schema of the capability-authorization-policy.v1 sidecar.
//
//go:embed capability-authorization-policy.v1.schema.json
var PolicySchema []byte

var (
	schemaOnce                   sync.Once
	registrySchema, policySchema *jsv.Schema
	schemaErr                    error
)

// compiledSchemas compiles the two embedded document schemas once, asserting formats
// (removal/deadline is a date-time, not an annotation).
func compiledSchemas() (*jsv.Schema, *jsv.Schema, error) {
	schemaOnce.Do(func() {
		compile := func(name string, b []byte) (*jsv.Schema, error) {
			doc, err := jsv.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				return nil, fmt.Errorf("registry: embedded %s: %w", name, err)
			}
			c := jsv.NewCompiler()
			c.AssertFormat()
			url := "mem:///" + name
			if err := c.AddResource(url, doc); err != nil {
				return nil, fmt.Errorf("registry: embedded %s: %w", name, err)
			}
			return c.Compile(url)
		}
		registrySchema, schemaErr = compile("capability-registry.v1.schema.json", RegistrySchema)
		if schemaErr == nil {
			policySchema, schemaErr = compile("capability-authorization-policy.v1.schema.json", PolicySchema)
		}
	})
	return registrySchema, policySchema, schemaErr
}

// schemaGate validates one parsed document against sch and turns every leaf error into a
// Diagnostic naming the entry and the rule. name names the entry at an instance location.
func schemaGate(src string, sch *jsv.Schema, inst any, ruleOf func(path string, k jsv.ErrorKind, loc []string) Rule, name func(loc []string) string) []Diagnostic {
	err := sch.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsv.ValidationError
	if !errors.As(err, &ve) {
		return []Diagnostic{{Source: src, Rule: ruleOf("", nil, nil), Message: err.Error()}}
	}
	var out []Diagnostic
	seen := map[string]bool{}
	var walk func(e *jsv.ValidationError)
	walk = func(e *jsv.ValidationError) {
		if _, any := e.ErrorKind.(*kind.AnyOf); any && len(e.Causes) > 0 {
			// One diagnostic for "matches none of the alternatives" (the id shapes), named
			// by the first alternative's rule.
			first := e.Causes[0]
			for len(first.Causes) > 0 {
				first = first.Causes[0]
			}
			path := first.SchemaURL
			if i := strings.IndexByte(path, '#'); i >= 0 {
				path = path[i+1:]
			}
			d := Diagnostic{Source: src, Entry: name(e.InstanceLocation), Rule: ruleOf(path, first.ErrorKind, e.InstanceLocation),
				Message: fmt.Sprintf("at /%s: matches none of the %d allowed shapes", strings.Join(e.InstanceLocation, "/"), len(e.Causes))}
			if d.Rule == RuleIDGrammar {
				d.Message = fmt.Sprintf("at /%s: capability/id matches none of the P072 id shapes (bare dotted, core/, sovereign, ~custom)", strings.Join(e.InstanceLocation, "/"))
			}
			if k := d.String(); !seen[k] {
				seen[k] = true
				out = append(out, d)
			}
			return
		}
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		path := e.SchemaURL
		if i := strings.IndexByte(path, '#'); i >= 0 {
			path = path[i+1:]
		}
		if e.ErrorKind != nil {
			path += "/" + strings.Join(e.ErrorKind.KeywordPath(), "/")
		}
		d := Diagnostic{Source: src, Entry: name(e.InstanceLocation), Rule: ruleOf(path, e.ErrorKind, e.InstanceLocation),
			Message: fmt.Sprintf("at /%s: %s", strings.Join(e.InstanceLocation, "/"), e.ErrorKind.LocalizedString(printer))}
		if k := d.String(); !seen[k] {
			seen[k] = true
			out = append(out, d)
		}
	}
	walk(ve)
	return out
}

// registryRule maps a failing keyword of capability-registry.v1.schema.json to its rule.
func registryRule(path string, k jsv.ErrorKind, loc []string) Rule {
	has := func(s string) bool { return strings.Contains(path, s) }
	if has("/$defs/mcp") {
		return RuleMCPPin // any shape problem of the mcp member (registry/mcp.go)
	}
	if ap, ok := k.(*kind.AdditionalProperties); ok && ap != nil {
		if has("/flags") {
			return RuleFlagsExplicit
		}
		return RuleStrictShape
	}
	if rq, ok := k.(*kind.Required); ok && rq != nil && !has("/then") {
		miss := ""
		if len(rq.Missing) > 0 {
			miss = rq.Missing[0]
		}
		switch {
		case has("/flags"):
			return RuleFlagsExplicit
		case has("/$defs/destination"):
			return RuleDestination
		case has("/$defs/http"):
			return RuleHTTP
		case has("/$defs/airlock"):
			return airlockFieldRule(miss)
		}
		return entryFieldRule(miss)
	}
	switch {
	case has("/then") || has("/else") || has("removal~1deadline"):
		return RuleDeprecatedDeadline
	case has("/$defs/destination"):
		return RuleDestination
	case has("/$defs/http"):
		return RuleHTTP
	case has("/$defs/airlock"):
		for _, f := range []string{"tool~1name", "description", "side-effect", "network", "per-turn~1cap", "timeout"} {
			if has("/properties/" + f + "/") {
				return airlockFieldRule(strings.ReplaceAll(f, "~1", "/"))
			}
		}
		if len(loc) == 3 { // the airlock value itself is not an object
			return RuleAirlockBlock
		}
		return RuleStrictShape
	case has("/flags"):
		return RuleFlagsExplicit
	case has("/properties/schema~1v"):
		return RuleSchemaVersion
	case has("/properties/entries/minItems"):
		return RuleNonEmpty
	}
	for _, f := range []string{"capability~1id", "version", "owner", "surfaces", "wire~1name", "status"} {
		if has("/$defs/entry/properties/" + f + "/") {
			return entryFieldRule(strings.ReplaceAll(f, "~1", "/"))
		}
	}
	return RuleStrictShape
}

func entryFieldRule(field string) Rule {
	switch field {
	case "capability/id":
		return RuleIDGrammar
	case "version":
		return RuleVersion
	case "owner":
		return RuleOwner
	case "surfaces":
		return RuleSurfacesDeclared
	case "wire/name":
		return RuleWireNamespace
	case "status":
		return RuleStatus
	case "flags":
		return RuleFlagsExplicit
	case "schema/v":
		return RuleSchemaVersion
	case "entries":
		return RuleNonEmpty
	}
	return RuleStrictShape
}

func airlockFieldRule(field string) Rule {
	switch field {
	case "tool/name":
		return RuleToolName
	case "description":
		return RuleDescription
	case "side-effect", "network":
		return RuleEffectClass
	case "per-turn/cap":
		return RulePerTurnCap
	case "timeout":
		return RuleTimeout
	case "kind":
		return RuleProposalKind
	}
	return RuleAirlockBlock
}

// policyRule maps a failing keyword of the policy schema to its rule.
func policyRule(path string, _ jsv.ErrorKind, _ []string) Rule {
	if strings.Contains(path, "/properties/schema~1v") {
		return RulePolicySchemaVersion
	}
	return RulePolicyShape
}

// entryName names the entry at an instance location of a raw document ("web.fetch@1", or
// "entries[3]" when the entry has no usable id).
func entryName(raw any, listKey string) func(loc []string) string {
	return func(loc []string) string {
		if len(loc) < 2 || loc[0] != listKey {
			return ""
		}
		i, err := strconv.Atoi(loc[1])
		if err != nil {
			return ""
		}
		doc, _ := raw.(map[string]any)
		list, _ := doc[listKey].([]any)
		if i < 0 || i >= len(list) {
			return fmt.Sprintf("%s[%d]", listKey, i)
		}
		m, _ := list[i].(map[string]any)
		id, _ := m["capability/id"].(string)
		if id == "" {
			if p, ok := m["principal"].(string); ok && p != "" {
				return "principal " + p
			}
			return fmt.Sprintf("%s[%d]", listKey, i)
		}
		v := m["version"]
		return fmt.Sprintf("%s@%v", id, jsonNumber(v))
	}
}

func jsonNumber(v any) string {
	switch n := v.(type) {
	case nil:
		return "?"
	case fmt.Stringer:
		return n.String()
	default:
		return fmt.Sprint(n)
	}
}
