package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/airlock-dev/airlock/internal/canonical"
	"github.com/airlock-dev/airlock/registry"
)

// GuidanceDocument is a whole capability-guidance.v1 file: optional, lower-trust descriptions
// of capabilities, each bound to one exact contract.
type GuidanceDocument struct {
	SchemaV  string          `json:"schema/v"`
	Revision string          `json:"revision"`
	Guidance []GuidanceEntry `json:"guidance"`
}

// GuidanceEntry is the guidance of one capability/id@version. ContractRef and ContractDigest
// pin the exact contract it describes (ContractRef, ContractDigest of the entry); guidance
// whose pin does not match the served contract is omitted. UsageRef (a local instruction
// reference) is not resolved in this slice: guidance naming one is excluded. DocURL is
// accepted and never dereferenced, nor shown.
type GuidanceEntry struct {
	ID             string            `json:"capability/id"`
	Version        int               `json:"version"`
	ContractRef    string            `json:"contract/ref"`
	ContractDigest string            `json:"contract/digest"`
	Lang           string            `json:"lang,omitempty"`
	Description    string            `json:"description"`
	UsageWhen      string            `json:"usage/when,omitempty"`
	UsageAvoid     string            `json:"usage/avoid,omitempty"`
	UsageNotes     []string          `json:"usage/notes,omitempty"`
	UsageRef       string            `json:"usage/ref,omitempty"`
	DocURL         string            `json:"doc/url,omitempty"`
	Examples       []json.RawMessage `json:"examples,omitempty"`
}

// Guidance states (describe's guidance.state and list's guidance field).
const (
	GuidancePresent  = "present"
	GuidanceAbsent   = "absent"
	GuidanceExcluded = "excluded" // mismatched, ambiguous or invalid: omitted, no diagnostic disclosed
)

// Bound is guidance admitted for one capability: its text, its examples in canonical form and
// the digest of exactly that (Digest), which the result carries.
type Bound struct {
	Lang        string            `json:"lang"`
	Description string            `json:"description"`
	UsageWhen   string            `json:"usage/when,omitempty"`
	UsageAvoid  string            `json:"usage/avoid,omitempty"`
	UsageNotes  []string          `json:"usage/notes,omitempty"`
	Examples    []json.RawMessage `json:"examples,omitempty"`
}

// GuidanceSet is the merged guidance of every loaded document, by "id@version". Several
// contributions for one key are kept: they are ambiguous and none wins.
type GuidanceSet struct {
	byKey map[string][]GuidanceEntry
}

// ErrGuidance wraps every guidance document problem. Guidance never stops a worker: a broken
// document contributes nothing (its capabilities describe without guidance) and the error is
// for the operator's log.
var ErrGuidance = errors.New("catalog: invalid capability-guidance.v1 document")

// ParseGuidance merges guidance documents. A document that does not decode strictly (unknown
// keys, wrong schema/v, trailing data) contributes nothing and its error is returned beside the
// set; the set is never nil.
func ParseGuidance(sources ...registry.Source) (*GuidanceSet, []error) {
	gs := &GuidanceSet{byKey: map[string][]GuidanceEntry{}}
	var errs []error
	for _, src := range sources {
		dec := json.NewDecoder(bytes.NewReader(src.Data))
		dec.DisallowUnknownFields()
		var doc GuidanceDocument
		if err := dec.Decode(&doc); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s: %w", ErrGuidance, src.Name, err))
			continue
		}
		if dec.More() {
			errs = append(errs, fmt.Errorf("%w: %s: trailing data", ErrGuidance, src.Name))
			continue
		}
		if _, err := canonical.Canonicalize(src.Data); errors.Is(err, canonical.ErrDuplicateKey) {
			errs = append(errs, fmt.Errorf("%w: %s: %w", ErrGuidance, src.Name, err)) // a reader would see the first
			continue
		}
		if doc.SchemaV != GuidanceSchema {
			errs = append(errs, fmt.Errorf("%w: %s: schema/v %q is not %s", ErrGuidance, src.Name, doc.SchemaV, GuidanceSchema))
			continue
		}
		for _, g := range doc.Guidance {
			k := fmt.Sprintf("%s@%d", g.ID, g.Version)
			gs.byKey[k] = append(gs.byKey[k], g)
		}
	}
	return gs, errs
}

// ContractRef is the reference guidance pins: "capability-registry.v1#id@version".
func ContractRef(c *registry.Capability) string { return registry.SchemaVersion + "#" + c.Key() }

// ContractDigest is the digest of c's exact contract: its registry entry and its argument
// schema, canonical JSON, "sha256:" + 64 hex digits. Any change to either changes it, which
// excludes guidance written for the old contract.
func ContractDigest(c *registry.Capability) (string, error) {
	ent, err := json.Marshal(c.Entry)
	if err != nil {
		return "", fmt.Errorf("catalog: contract digest of %s: %w", c.Key(), err)
	}
	schema := c.Schema
	if len(schema) == 0 {
		schema = json.RawMessage("null")
	}
	doc, err := json.Marshal(struct {
		Entry  json.RawMessage `json:"entry"`
		Schema json.RawMessage `json:"schema"`
	}{ent, schema})
	if err != nil {
		return "", fmt.Errorf("catalog: contract digest of %s: %w", c.Key(), err)
	}
	d, err := canonical.Digest(doc)
	if err != nil {
		return "", fmt.Errorf("catalog: contract digest of %s: %w", c.Key(), err)
	}
	return "sha256:" + d, nil
}

// Bind returns the guidance admitted for c and its digest, or the state saying why there is
// none: GuidanceAbsent (no contribution) or GuidanceExcluded (several contributions, a pin
// that does not match c's contract, an unresolved usage/ref, text over MaxGuidanceText, more
// than MaxExamples examples, or an example over MaxExampleBytes or invalid against c's request
// schema). Excluded guidance is omitted whole, never repaired. Nothing is fetched.
func (gs *GuidanceSet) Bind(c *registry.Capability) (state string, b *Bound, digest string) {
	if gs == nil {
		return GuidanceAbsent, nil, ""
	}
	gl := gs.byKey[c.Key()]
	switch {
	case len(gl) == 0:
		return GuidanceAbsent, nil, ""
	case len(gl) > 1:
		return GuidanceExcluded, nil, ""
	}
	g := gl[0]
	want, err := ContractDigest(c)
	if err != nil || g.ContractRef != ContractRef(c) || g.ContractDigest != want || g.UsageRef != "" || g.Description == "" {
		return GuidanceExcluded, nil, ""
	}
	text := len(g.Description) + len(g.UsageWhen) + len(g.UsageAvoid)
	for _, n := range g.UsageNotes {
		text += len(n)
	}
	if text > MaxGuidanceText || len(g.Examples) > MaxExamples {
		return GuidanceExcluded, nil, ""
	}
	out := &Bound{Lang: g.Lang, Description: g.Description, UsageWhen: g.UsageWhen, UsageAvoid: g.UsageAvoid, UsageNotes: g.UsageNotes}
	if out.Lang == "" {
		out.Lang = "en"
	}
	for _, ex := range g.Examples {
		cx, err := canonical.Canonicalize(ex)
		if err != nil || len(cx) > MaxExampleBytes {
			return GuidanceExcluded, nil, ""
		}
		if _, err := c.ValidateArguments(cx); err != nil {
			return GuidanceExcluded, nil, ""
		}
		out.Examples = append(out.Examples, cx)
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return GuidanceExcluded, nil, ""
	}
	d, err := canonical.Digest(raw)
	if err != nil {
		return GuidanceExcluded, nil, ""
	}
	return GuidancePresent, out, "sha256:" + d
}

// Keys lists the capability keys guidance was contributed for, sorted (for operators).
func (gs *GuidanceSet) Keys() []string {
	if gs == nil {
		return nil
	}
	out := make([]string, 0, len(gs.byKey))
	for k := range gs.byKey {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// shortDigest is "sha256:" + the hex SHA-256 of b.
func shortDigest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}
