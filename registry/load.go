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
	"sort"
	"strings"
	"time"

	"github.com/invopop/jsonschema"
	jsv "github.com/santhosh-tekuri/jsonschema/v6"
)

// Embedded is the checked-in production registry, compiled into the binary so a worker never
// starts on a registry other than the reviewed one unless an operator passes a file.
//
//go:embed capability-registry.v1.json
var Embedded []byte

// ErrInvalid is wrapped by every load failure; the LoadError lists each problem.
var ErrInvalid = errors.New("registry: invalid capability registry")

// LoadError is the operator diagnostic of a failed load: every problem found, one per line,
// each naming the entry. The worker refuses to serve while it is returned (P072 "load-time
// fail-closed").
type LoadError struct {
	Source   string
	Problems []string
}

func (e *LoadError) Error() string {
	return fmt.Sprintf("registry: %s is not a valid %s (%d problems):\n  - %s",
		e.Source, SchemaVersion, len(e.Problems), strings.Join(e.Problems, "\n  - "))
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *LoadError) Unwrap() error { return ErrInvalid }

// Source is one registry document to load: a name for diagnostics and its bytes.
type Source struct {
	Name string
	Data []byte
}

// FileSource reads a registry document from disk. A missing file is an error (fail closed).
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
}

// Registry is a loaded, validated, fully bound registry. It is immutable and safe for
// concurrent use.
type Registry struct {
	revision string
	caps     []*Capability // sorted by capability/id, then version
	byTool   map[string]*Capability
	byKey    map[string]*Capability
}

// Load parses and validates one or more registry documents (the base registry plus optional
// layers), then binds impls. Every problem is collected into one *LoadError.
//
// Checks: strict JSON (unknown fields rejected); schema/v; P072 id grammar; version >= 1;
// owner; surfaces equal to the set derived from the flags; wire/name namespace and
// uniqueness; status; tool/name grammar and uniqueness; side-effect, network, per-turn/cap,
// timeout; (id, version) uniqueness; every active or deprecated entry has an implementation
// and every implementation has an entry; Go argument types generate a schema; supplied
// schemas compile.
func Load(sources []Source, impls []Implementation) (*Registry, error) {
	le := &LoadError{}
	var names []string
	var entries []Entry
	var revs []string
	var content []byte
	for _, src := range sources {
		names = append(names, src.Name)
		doc, err := decodeDocument(src.Data)
		if err != nil {
			le.Problems = append(le.Problems, fmt.Sprintf("%s: %v", src.Name, err))
			continue
		}
		if doc.SchemaV != SchemaVersion {
			le.Problems = append(le.Problems, fmt.Sprintf("%s: schema/v is %q, want %q", src.Name, doc.SchemaV, SchemaVersion))
		}
		if len(doc.Entries) == 0 {
			le.Problems = append(le.Problems, fmt.Sprintf("%s: no entries (an empty allow-set is refused)", src.Name))
		}
		revs = append(revs, doc.Revision)
		content = append(content, src.Data...)
		entries = append(entries, doc.Entries...)
	}
	le.Source = strings.Join(names, " + ")
	if len(sources) == 0 {
		le.Problems = append(le.Problems, "no registry document given")
	}

	// The revision is the documents' declared revisions plus a digest of their content: an
	// entry edited without bumping "revision" is still a registry change (approvals given
	// under the old content are void).
	sum := sha256.Sum256(content)
	r := &Registry{revision: strings.Join(revs, "+") + "#" + hex.EncodeToString(sum[:6]), byTool: map[string]*Capability{}, byKey: map[string]*Capability{}}
	wire := map[string]string{}
	implByKey := map[string]Implementation{}
	for _, im := range impls {
		k := fmt.Sprintf("%s@%d", im.ID, im.Version)
		if _, dup := implByKey[k]; dup {
			le.Problems = append(le.Problems, fmt.Sprintf("implementation %s bound twice", k))
		}
		implByKey[k] = im
	}
	used := map[string]bool{}
	for _, e := range entries {
		le.Problems = append(le.Problems, checkEntry(e)...)
		k := e.Key()
		if _, dup := r.byKey[k]; dup {
			le.Problems = append(le.Problems, fmt.Sprintf("%s: duplicate capability/id and version", k))
			continue
		}
		if prev, dup := wire[e.WireName]; dup && e.WireName != "" {
			le.Problems = append(le.Problems, fmt.Sprintf("%s: wire/name %q already used by %s", k, e.WireName, prev))
		}
		wire[e.WireName] = k
		c := &Capability{Entry: e}
		if prev, dup := r.byTool[e.Airlock.ToolName]; dup {
			le.Problems = append(le.Problems, fmt.Sprintf("%s: tool/name %q already used by %s", k, e.Airlock.ToolName, prev.Key()))
		} else {
			r.byTool[e.Airlock.ToolName] = c
		}
		r.byKey[k] = c
		r.caps = append(r.caps, c)
		im, ok := implByKey[k]
		switch {
		case e.Status == StatusReserved:
			if ok {
				used[k] = true // a reserved name may have code waiting; it stays refused
			}
		case !ok:
			le.Problems = append(le.Problems, fmt.Sprintf("%s: entry has no implementation (nothing to execute; refusing to serve)", k))
		default:
			used[k] = true
			c.Impl = im
			if err := c.bindSchema(); err != nil {
				le.Problems = append(le.Problems, fmt.Sprintf("%s: %v", k, err))
			}
		}
	}
	var orphan []string
	for k := range implByKey {
		if !used[k] {
			orphan = append(orphan, k)
		}
	}
	sort.Strings(orphan)
	for _, k := range orphan {
		le.Problems = append(le.Problems, fmt.Sprintf("%s: implementation has no registry entry", k))
	}
	if len(le.Problems) > 0 {
		return nil, le
	}
	sort.Slice(r.caps, func(i, j int) bool {
		if r.caps[i].ID != r.caps[j].ID {
			return r.caps[i].ID < r.caps[j].ID
		}
		return r.caps[i].Version < r.caps[j].Version
	})
	return r, nil
}

func decodeDocument(b []byte) (Document, error) {
	var doc Document
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

func checkEntry(e Entry) []string {
	var p []string
	k := e.Key()
	bad := func(format string, a ...any) { p = append(p, k+": "+fmt.Sprintf(format, a...)) }
	if !ValidID(e.ID) {
		bad("capability/id %q matches none of the P072 id shapes", e.ID)
	}
	if e.Version < 1 {
		bad("version must be >= 1")
	}
	if strings.TrimSpace(e.Owner) == "" {
		bad("owner is required")
	}
	if !reWireName.MatchString(e.WireName) {
		bad("wire/name %q must start with a known namespace (app/, host/, role/, plugin/, core/)", e.WireName)
	}
	switch e.Status {
	case StatusActive, StatusReserved, StatusDeprecated:
	default:
		bad("status %q is not active, reserved or deprecated", e.Status)
	}
	want := derivedSurfaces(e.Flags)
	got := map[Surface]bool{}
	for _, s := range e.Surfaces {
		if s != SurfaceFederated && s != SurfaceHostLocal {
			bad("unknown surface %q", s)
		}
		got[s] = true
	}
	if len(e.Surfaces) == 0 {
		bad("surfaces must be a non-empty subset of {federated, host-local}")
	} else if len(got) != len(want) || got[SurfaceFederated] != want[SurfaceFederated] || got[SurfaceHostLocal] != want[SurfaceHostLocal] {
		bad("surfaces %v contradict the set derived from the flags", e.Surfaces)
	}
	a := e.Airlock
	if !ToolNamePattern.MatchString(a.ToolName) {
		bad("airlock tool/name %q must match %s", a.ToolName, ToolNamePattern)
	}
	if strings.TrimSpace(a.Description) == "" {
		bad("airlock description is required")
	}
	switch a.SideEffect {
	case SideEffectNone, SideEffectLocalWrite, SideEffectExternalWrite:
	default:
		bad("airlock side-effect %q is not none, local-write or external-write", a.SideEffect)
	}
	switch a.Network {
	case NetworkLocal, NetworkExternal:
	default:
		bad("airlock network %q is not local or external", a.Network)
	}
	if a.PerTurnCap < 1 {
		bad("airlock per-turn/cap must be >= 1")
	}
	if d, err := time.ParseDuration(a.Timeout); err != nil || d <= 0 {
		bad("airlock timeout %q is not a positive duration", a.Timeout)
	}
	if a.ModelVisible && !e.Flags.Dispatchable {
		bad("model-visible but not dispatchable")
	}
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
	comp := jsv.NewCompiler()
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
