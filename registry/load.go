package registry

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/invopop/jsonschema"
	jsv "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/airlock-dev/airlock/cedarpolicy"
	"github.com/airlock-dev/airlock/internal/canonical"
)

// Embedded is the checked-in production registry, compiled into the binary so a worker never
// starts on a registry other than the reviewed one unless an operator passes a file.
//
//go:embed capability-registry.v1.json
var Embedded []byte

// ErrInvalid is wrapped by every load failure; the LoadError lists each problem.
var ErrInvalid = errors.New("registry: invalid capability registry")

// LoadError is the operator diagnostic of a failed load: every problem found, each naming
// the document, the entry and the rule it breaks. The worker refuses to serve while it is
// returned (P072 "load-time fail-closed"); a reload that returns it keeps the old revision.
type LoadError struct {
	Source      string
	Diagnostics []Diagnostic
	// Problems are the Diagnostics rendered one per line (Diagnostic.String).
	Problems []string
}

func (e *LoadError) Error() string {
	return fmt.Sprintf("registry: %s is not a valid %s (%d problems):\n  - %s",
		e.Source, SchemaVersion, len(e.Problems), strings.Join(e.Problems, "\n  - "))
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *LoadError) Unwrap() error { return ErrInvalid }

// Rules lists the distinct rules of the diagnostics, in first-seen order.
func (e *LoadError) Rules() []Rule {
	var out []Rule
	for _, d := range e.Diagnostics {
		if !slices.Contains(out, d.Rule) {
			out = append(out, d.Rule)
		}
	}
	return out
}

// Source is one document to load: a name for diagnostics and its bytes. A source is a
// registry document (capability-registry.v1) or a policy sidecar
// (capability-authorization-policy.v1), told apart by its "schema/v".
type Source struct {
	Name string
	Data []byte
}

// FileSource reads a document from disk. A missing file is an error (fail closed).
func FileSource(path string) (Source, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Source{}, fmt.Errorf("registry: read %s: %w", path, err)
	}
	return Source{Name: path, Data: b}, nil
}

// Capability is an entry bound to its implementation, with its argument schema compiled.
type Capability struct {
	Entry
	Impl Implementation
	// Schema is the JSON Schema of the arguments (generated from Go types or supplied).
	Schema json.RawMessage
	// compiled validates arguments at stage 2.
	compiled *jsv.Schema
	// fingerprint digests the entry, its policy entry, the principals' grants and the
	// argument schema: what an approval of this capability was given under.
	fingerprint string
}

// Fingerprint identifies what a confirmation of this capability is bound to: its entry, its
// policy entry, the principals' grants and its argument schema ("cap:" + 16 hex digits). A
// registry change that leaves all four alone keeps it; any other change voids approvals.
func (c *Capability) Fingerprint() string { return c.fingerprint }

// Registry is a loaded, validated, fully bound registry and its policy. It is immutable and
// safe for concurrent use; a reload builds a new one (see Live).
type Registry struct {
	revision string
	caps     []*Capability // sorted by capability/id, then version
	byTool   map[string]*Capability
	byKey    map[string]*Capability
	policy   *Policy
	// cedar is the Cedar policy (a source named *.cedar), nil when none is loaded.
	cedar *cedarpolicy.Set
	// shadow is the candidate Cedar policy (a source named *.shadow.cedar), nil when none.
	shadow *cedarpolicy.Set
}

// Load parses and validates registry documents (the base registry plus optional layers) and
// their policy sidecars, then binds impls. Three gates stay distinct: this is the load-time
// shape and consistency check; Eligible is the registry-admission gate; Authorize is the
// runtime policy gate. Every problem is collected into one *LoadError, each a Diagnostic that
// names its document, entry and Rule (AllRules lists them).
//
// Order: each document is parsed and passed through its JSON Schema (strict, formats
// asserted); then the cross-entry rules (uniqueness of id@version, wire/name and tool/name;
// surfaces derived from the flags; the airlock block where required); then the policy
// against the entries; then the binding of implementations (every admitted dispatchable
// entry has one and every implementation has an entry; argument schemas compile and use only
// enforced keywords).
func Load(sources []Source, impls []Implementation) (*Registry, error) {
	return load(sources, impls, true)
}

// LoadUnbound validates documents and policy like Load but binds no implementation: the
// implementation and argument-schema rules are not checked and no entry is dispatchable. It
// is for tools that read the registry without serving it (the documentation projection).
func LoadUnbound(sources []Source) (*Registry, error) { return load(sources, nil, false) }

func load(sources []Source, impls []Implementation, bind bool) (*Registry, error) {
	le := &LoadError{}
	var names []string
	var entries []sourcedEntry
	var policies []namedPolicy
	var revs []string
	var content []byte
	regSchema, polSchema, err := compiledSchemas()
	if err != nil {
		return nil, err
	}
	add := func(ds ...Diagnostic) { le.Diagnostics = append(le.Diagnostics, ds...) }
	docs, brokenDocs, brokenPolicies := 0, 0, 0
	var cedarSources, shadowSources []Source
	for _, src := range sources {
		names = append(names, src.Name)
		if IsShadowSource(src) {
			shadowSources = append(shadowSources, src) // not in the revision: it decides nothing
			continue
		}
		content = append(content, src.Data...)
		if IsCedarSource(src) {
			cedarSources = append(cedarSources, src)
			continue
		}
		policyDoc := isPolicy(src.Data)
		raw, err := jsv.UnmarshalJSON(bytes.NewReader(src.Data))
		if err == nil {
			// A repeated member means two things: a reviewer reading the file sees the first,
			// every JSON decoder here keeps the last (`"side-effect": "external-write",
			// "side-effect": "none"`). Refused, at any depth, as malformed.
			if _, cerr := canonical.Canonicalize(src.Data); errors.Is(cerr, canonical.ErrDuplicateKey) {
				err = cerr
			}
		}
		if err != nil {
			rule := RuleDocumentParse
			if policyDoc {
				rule, brokenPolicies = RulePolicyParse, brokenPolicies+1
			} else {
				brokenDocs++
			}
			add(Diagnostic{Source: src.Name, Rule: rule, Message: "malformed JSON: " + err.Error()})
			continue
		}
		if policyDoc {
			ds := schemaGate(src.Name, polSchema, raw, policyRule, entryName(raw, "capabilities"))
			add(ds...)
			doc, err := decodeStrict[PolicyDocument](src.Data)
			if err != nil || len(ds) > 0 {
				if len(ds) == 0 {
					add(Diagnostic{Source: src.Name, Rule: RulePolicyShape, Message: err.Error()})
				}
				brokenPolicies++
				continue
			}
			revs = append(revs, doc.Revision)
			policies = append(policies, namedPolicy{source: src.Name, doc: doc})
			continue
		}
		docs++
		ds := schemaGate(src.Name, regSchema, raw, registryRule, entryName(raw, "entries"))
		add(ds...)
		doc, err := decodeDocument(src.Data)
		if err != nil {
			if len(ds) == 0 {
				add(Diagnostic{Source: src.Name, Rule: RuleStrictShape, Message: err.Error()})
			}
			brokenDocs++
			continue
		}
		if len(ds) > 0 {
			brokenDocs++
		}
		revs = append(revs, doc.Revision)
		for _, e := range doc.Entries {
			entries = append(entries, sourcedEntry{Entry: e, source: src.Name, shapeFailed: len(ds) > 0})
		}
	}
	le.Source = strings.Join(names, " + ")
	if docs == 0 && brokenDocs == 0 {
		add(Diagnostic{Rule: RuleNonEmpty, Message: "no registry document given (an empty allow-set is refused)"})
	}

	// The revision is the documents' declared revisions plus a digest of their content: an
	// entry edited without bumping "revision" is still a registry change.
	sum := sha256.Sum256(content)
	r := &Registry{revision: strings.Join(revs, "+") + "#" + hex.EncodeToString(sum[:6]), byTool: map[string]*Capability{}, byKey: map[string]*Capability{}}
	wire := map[string]string{}
	implByKey := map[string]Implementation{}
	for _, im := range impls {
		k := fmt.Sprintf("%s@%d", im.ID, im.Version)
		if _, dup := implByKey[k]; dup {
			add(Diagnostic{Entry: k, Rule: RuleImplementationRegistered, Message: "implementation bound twice"})
		}
		implByKey[k] = im
	}
	used := map[string]bool{}
	byKey := map[string]Entry{}
	for _, se := range entries {
		e := se.Entry
		k := e.Key()
		bad := func(rule Rule, format string, a ...any) {
			add(Diagnostic{Source: se.source, Entry: k, Rule: rule, Message: fmt.Sprintf(format, a...)})
		}
		if _, dup := r.byKey[k]; dup {
			bad(RuleIDUnique, "capability/id and version are registered twice")
			continue
		}
		c := &Capability{Entry: e}
		r.byKey[k] = c
		byKey[k] = e
		r.caps = append(r.caps, c)
		if se.shapeFailed {
			used[k] = true // its shape diagnostics stand; no second diagnostic for the binding
			continue
		}
		if ds := checkEntry(se.source, e); len(ds) > 0 {
			add(ds...)
			if slices.ContainsFunc(ds, func(d Diagnostic) bool { return d.Rule == RuleAirlockBlock || d.Rule == RuleHTTP }) {
				used[k] = true // nothing to bind without the block (or with a broken http block); its diagnostic stands
				continue
			}
		}
		if prev, dup := wire[e.WireName]; dup {
			bad(RuleWireUnique, "wire/name %q already used by %s", e.WireName, prev)
		}
		wire[e.WireName] = k
		if e.Airlock.ToolName != "" {
			if prev, dup := r.byTool[e.Airlock.ToolName]; dup && mcpConflict(prev.Entry, e) {
				bad(RuleMCPToolUnique, "tool/name %q is offered by MCP server %q (%s) and by MCP server %q: two servers may not offer one tool name (rename one with airlock mcp import --prefix)",
					e.Airlock.ToolName, prev.Airlock.MCP.Server, prev.Key(), e.Airlock.MCP.Server)
			} else if dup {
				bad(RuleToolNameUnique, "tool/name %q already used by %s", e.Airlock.ToolName, prev.Key())
			} else {
				r.byTool[e.Airlock.ToolName] = c
			}
		}
		im, ok := implByKey[k]
		if !ok && e.Airlock.Kind == KindProposal {
			// Proposal tools are bound by the registry itself: their schemas are part of
			// Airlock's contract (ProposalImplementation), never supplied by a layer.
			im, ok = ProposalImplementation(e.ID, e.Version)
		}
		switch {
		case !bind:
		case e.Status == StatusReserved || !e.Flags.Dispatchable:
			if ok {
				used[k] = true // a reserved name may have code waiting; it stays refused
			}
		case !ok:
			bad(RuleImplementationBound, "entry has no implementation (nothing to execute; refusing to serve)")
		default:
			used[k] = true
			c.Impl = im
			if err := c.bindSchema(); err != nil {
				bad(RuleArgumentSchema, "%v", err)
			} else if err := c.checkDestinationFields(); err != nil {
				bad(RuleDestinationFields, "%v", err)
			} else if e.Airlock.HTTP != nil && (im.Args != nil || !bytes.Equal(im.Schema, e.Airlock.HTTP.ArgumentSchema())) {
				bad(RuleHTTP, "an http capability is served from its declaration; the implementation bound gives another argument schema")
			}
		}
	}
	shapeFailed := brokenDocs > 0 || slices.ContainsFunc(entries, func(se sourcedEntry) bool { return se.shapeFailed })
	var orphan []string
	for k := range implByKey {
		if shapeFailed || !bind {
			break // an entry that failed the shape gate may be the one this code binds to
		}
		if !used[k] {
			orphan = append(orphan, k)
		}
	}
	sort.Strings(orphan)
	for _, k := range orphan {
		add(Diagnostic{Entry: k, Rule: RuleImplementationRegistered, Message: "implementation has no registry entry (an unregistered capability is never admitted)"})
	}
	pol, pds := checkPolicies(policies, brokenPolicies, byKey)
	add(pds...)
	r.policy = pol
	if len(cedarSources) > 0 && len(le.Diagnostics) == 0 {
		set, cds := compileCedar(cedarSources, r.caps)
		add(cds...)
		r.cedar = set
	}
	if len(shadowSources) > 0 && len(le.Diagnostics) == 0 {
		set, cds := compileCedar(shadowSources, r.caps)
		add(cds...)
		r.shadow = set
	}
	if len(le.Diagnostics) > 0 {
		for _, d := range le.Diagnostics {
			le.Problems = append(le.Problems, d.String())
		}
		return nil, le
	}
	principals, _ := json.Marshal(pol.principals)
	for _, c := range r.caps {
		pe, _ := json.Marshal(pol.byKey[c.Key()])
		ent, _ := json.Marshal(c.Entry)
		parts := [][]byte{ent, pe, principals, c.Schema}
		if r.cedar != nil {
			parts = append(parts, []byte(r.cedar.Digest())) // a Cedar policy change voids approvals too
		}
		h := sha256.New()
		for _, part := range parts {
			h.Write(part)
			h.Write([]byte{0})
		}
		c.fingerprint = "cap:" + hex.EncodeToString(h.Sum(nil)[:8])
	}
	pol.revision = r.revision
	sort.Slice(r.caps, func(i, j int) bool {
		if r.caps[i].ID != r.caps[j].ID {
			return r.caps[i].ID < r.caps[j].ID
		}
		return r.caps[i].Version < r.caps[j].Version
	})
	return r, nil
}

// isPolicy tells a policy sidecar from a registry document by its "schema/v" (any version of
// capability-authorization-policy), also when the document does not parse.
func isPolicy(b []byte) bool {
	var head struct {
		SchemaV string `json:"schema/v"`
	}
	if json.Unmarshal(b, &head) == nil {
		return strings.HasPrefix(head.SchemaV, "capability-authorization-policy")
	}
	return bytes.Contains(b, []byte(`"capability-authorization-policy`))
}

type sourcedEntry struct {
	Entry
	source      string
	shapeFailed bool
}

// decodeDocument decodes a registry document strictly, then fills the fields its external
// entries left out (applyExternalDefaults).
func decodeDocument(b []byte) (Document, error) {
	doc, err := decodeStrict[Document](b)
	if err != nil {
		return doc, err
	}
	if err := applyExternalDefaults(b, &doc); err != nil {
		return doc, err
	}
	return doc, nil
}

func decodeStrict[T any](b []byte) (T, error) {
	var doc T
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return doc, fmt.Errorf("malformed JSON: %w", err)
	}
	if dec.More() {
		return doc, errors.New("malformed JSON: trailing data after the document")
	}
	return doc, nil
}

// checkEntry runs the per-entry rules the schema cannot state (it passed the schema gate).
func checkEntry(src string, e Entry) []Diagnostic {
	var p []Diagnostic
	bad := func(rule Rule, format string, a ...any) {
		p = append(p, Diagnostic{Source: src, Entry: e.Key(), Rule: rule, Message: fmt.Sprintf(format, a...)})
	}
	want := derivedSurfaces(e.Flags)
	got := map[Surface]bool{}
	for _, s := range e.Surfaces {
		got[s] = true
	}
	if len(got) != len(want) || got[SurfaceFederated] != want[SurfaceFederated] || got[SurfaceHostLocal] != want[SurfaceHostLocal] {
		bad(RuleSurfacesDerived, "surfaces %v contradict the set derived from the flags", e.Surfaces)
	}
	if e.Status == StatusDeprecated {
		if _, ok := e.Deadline(); !ok {
			bad(RuleDeprecatedDeadline, "removal/deadline %q is not an RFC 3339 instant", e.RemovalDeadline)
		}
	}
	hasBlock := e.Airlock != (Airlock{})
	if e.Flags.Dispatchable && e.Status != StatusReserved && !hasBlock {
		bad(RuleAirlockBlock, "a dispatchable entry needs the airlock block (tool name, classes, cap, timeout)")
	}
	if !hasBlock {
		return p
	}
	a := e.Airlock
	if a.ModelVisible && !e.Flags.Dispatchable {
		bad(RuleModelVisibleDispatchable, "model-visible but not dispatchable")
	}
	if d, err := time.ParseDuration(a.Timeout); err != nil || d <= 0 {
		bad(RuleTimeout, "airlock timeout %q is not a positive duration", a.Timeout)
	}
	p = append(p, checkProposalEntry(src, e)...)
	p = append(p, checkMCPEntry(src, e)...)
	p = append(p, checkDestination(src, e)...)
	p = append(p, checkHTTP(src, e)...)
	return p
}

// bindSchema generates (Go-typed) or takes (schema-defined) the argument schema and compiles it.
func (c *Capability) bindSchema() error {
	switch {
	case c.Impl.Args != nil && c.Impl.Schema != nil:
		return errors.New("implementation gives both a Go argument type and a schema")
	case c.Impl.Args != nil:
		rf := &jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true, Anonymous: true}
		s := rf.Reflect(c.Impl.Args)
		s.Version = ""
		s.ID = ""
		b, err := json.Marshal(s)
		if err != nil {
			return fmt.Errorf("generate argument schema: %w", err)
		}
		c.Schema = b
	case c.Impl.Schema != nil:
		c.Schema = c.Impl.Schema
	default:
		return errors.New("implementation gives neither a Go argument type nor a schema")
	}
	if c.Impl.Invoke == nil {
		return errors.New("implementation has no Invoke function")
	}
	doc, err := jsv.UnmarshalJSON(bytes.NewReader(c.Schema))
	if err != nil {
		return fmt.Errorf("argument schema is not JSON: %w", err)
	}
	if err := checkEnforced(doc, ""); err != nil {
		return fmt.Errorf("argument schema refused: %w", err)
	}
	comp := jsv.NewCompiler()
	comp.AssertFormat()
	comp.DefaultDraft(jsv.Draft2020)
	url := "mem://" + c.Key() + ".json"
	if err := comp.AddResource(url, doc); err != nil {
		return fmt.Errorf("argument schema: %w", err)
	}
	sch, err := comp.Compile(url)
	if err != nil {
		return fmt.Errorf("argument schema does not compile: %w", err)
	}
	c.compiled = sch
	return nil
}

// Revision identifies the loaded registry documents: their "revision" fields joined, then
// "#" and a digest of their bytes. It is recorded with approvals so a registry change between
// approval and execution is visible, whether or not the declared revision was bumped.
func (r *Registry) Revision() string { return r.revision }

// Capabilities returns every entry, sorted by capability/id then version.
func (r *Registry) Capabilities() []*Capability { return r.caps }

// ByToolName resolves a model-facing tool name exactly (no trimming, case folding or fuzzy
// match: RFC-0004 non-corrective). ok is false for unknown names.
func (r *Registry) ByToolName(name string) (*Capability, bool) {
	c, ok := r.byTool[name]
	return c, ok
}

// ByKey finds an entry by "id@version".
func (r *Registry) ByKey(key string) (*Capability, bool) {
	c, ok := r.byKey[key]
	return c, ok
}

// CapabilityRevision is the Fingerprint of the capability registered under key ("id@version"),
// or "" when none is: what an admission, a confirmation and an execution of it are bound to.
func (r *Registry) CapabilityRevision(key string) string {
	if c, ok := r.byKey[key]; ok {
		return c.fingerprint
	}
	return ""
}
