package registry

import (
	"fmt"
	"slices"
	"strings"
)

// AssertedFormats are the "format" values argument schemas may use: each is asserted at stage
// 2 (santhosh-tekuri/jsonschema with AssertFormat), never a mere annotation as JSON Schema
// 2020-12 would otherwise treat it. Any other format is refused at load.
var AssertedFormats = []string{
	"date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname",
	"ipv4", "ipv6", "uri", "uri-reference", "iri", "iri-reference", "uuid", "json-pointer",
	"relative-json-pointer", "regex",
}

// Keywords of JSON Schema 2020-12 the validator enforces, by how their value is walked.
var (
	kwSchemaMap   = []string{"properties", "patternProperties", "$defs", "dependentSchemas"}
	kwSchema      = []string{"additionalProperties", "items", "contains", "not", "if", "then", "else", "propertyNames", "unevaluatedItems", "unevaluatedProperties"}
	kwSchemaArray = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	kwValue       = []string{"type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
		"maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxContains", "minContains",
		"maxProperties", "minProperties", "required", "dependentRequired", "$id", "$anchor", "$dynamicAnchor", "$dynamicRef"}
	// kwAnnotation are annotations that claim no constraint: allowed, never enforced.
	kwAnnotation = []string{"title", "description", "default", "examples", "$comment"}
)

// schemaDraft2020 is the only "$schema" an argument schema may declare (or none).
const schemaDraft2020 = "https://json-schema.org/draft/2020-12/schema"

// checkEnforced refuses an argument schema that uses a keyword the validator would not
// enforce: an unknown keyword (a typo, a vendor extension such as "x-…"), an annotation-only
// one that looks like a constraint (contentMediaType, contentEncoding, contentSchema,
// readOnly, writeOnly, deprecated), a format outside AssertedFormats, a "$ref" outside the
// document, or another draft's "$schema". Otherwise the author would believe a rule holds
// that stage 2 never checks.
func checkEnforced(s any, at string) error {
	switch v := s.(type) {
	case bool:
		return nil
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			val := v[k]
			where := at + "/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
			switch {
			case slices.Contains(kwSchemaMap, k):
				m, ok := val.(map[string]any)
				if !ok {
					return fmt.Errorf("%s: %q must be an object of schemas", where, k)
				}
				names := make([]string, 0, len(m))
				for n := range m {
					names = append(names, n)
				}
				slices.Sort(names)
				for _, n := range names {
					if err := checkEnforced(m[n], where+"/"+n); err != nil {
						return err
					}
				}
			case slices.Contains(kwSchema, k):
				if err := checkEnforced(val, where); err != nil {
					return err
				}
			case slices.Contains(kwSchemaArray, k):
				arr, ok := val.([]any)
				if !ok {
					return fmt.Errorf("%s: %q must be an array of schemas", where, k)
				}
				for i, x := range arr {
					if err := checkEnforced(x, fmt.Sprintf("%s/%d", where, i)); err != nil {
						return err
					}
				}
			case k == "format":
				f, _ := val.(string)
				if !slices.Contains(AssertedFormats, f) {
					return fmt.Errorf("%s: format %q is not asserted by the validator (asserted: %s)", where, f, strings.Join(AssertedFormats, ", "))
				}
			case k == "$ref":
				ref, _ := val.(string)
				if !strings.HasPrefix(ref, "#") {
					return fmt.Errorf("%s: $ref %q leaves the document (only local references are resolved)", where, ref)
				}
			case k == "$schema":
				if val != schemaDraft2020 {
					return fmt.Errorf("%s: $schema %v is not JSON Schema 2020-12", where, val)
				}
			case slices.Contains(kwValue, k), slices.Contains(kwAnnotation, k):
			default:
				return fmt.Errorf("%s: keyword %q would not be enforced by the validator", where, k)
			}
		}
		return nil
	default:
		return fmt.Errorf("%s: a schema must be an object or a boolean", at)
	}
}
