package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/airlock-dev/airlock/registry"
)

// ListArgs are the arguments of capability.catalog.list@1 (capability-catalog-request.v1,
// list): an optional exact capability/id prefix, a page limit (default DefaultLimit, at most
// MaxLimit) and the opaque cursor of the previous page.
type ListArgs struct {
	Prefix string `json:"prefix,omitempty" validate:"max=128" jsonschema:"description=Optional exact capability/id prefix (for example agentdojo.banking.); no pattern or search,maxLength=128"`
	Limit  int    `json:"limit,omitempty" validate:"omitempty,min=1,max=16" jsonschema:"description=Entries per page (default 8; at most 16),minimum=1,maximum=16"`
	Cursor string `json:"cursor,omitempty" validate:"max=1024" jsonschema:"description=The continuation cursor of the previous page with the same prefix and limit; omit it to start a fresh traversal,maxLength=1024"`
}

// DescribeArgs are the arguments of capability.catalog.describe@1 (capability-catalog-request.v1,
// describe): an exact capability id; the version selects the operation only where several
// versions are visible; include is summary (default) or schema; catalog_revision is the
// revision the caller last listed, reported stale when it differs.
type DescribeArgs struct {
	ID       string `json:"capability_id" validate:"required,max=256" jsonschema:"description=Exact capability/id as listed,minLength=1,maxLength=256"`
	Version  int    `json:"version,omitempty" validate:"omitempty,min=1,max=1000000" jsonschema:"description=Operation selector: needed only when several versions of the id are visible,minimum=1,maximum=1000000"`
	Include  string `json:"include,omitempty" validate:"omitempty,oneof=summary schema" jsonschema:"description=summary (default: bounded required fields types and enum/const values) or schema (the complete argument schema),enum=summary,enum=schema"`
	Revision string `json:"catalog_revision,omitempty" validate:"max=128" jsonschema:"description=The catalog/revision of the list this id came from (optional),maxLength=128"`
}

// Refusal codes of catalog reads. Each is non-retryable: the same call gets the same answer.
const (
	RefusalStaleCursor    = "stale_cursor"
	RefusalNotFound       = "not_found"
	RefusalResultTooLarge = "result_too_large"
)

// Refusal is a catalog read that returned no projection. It is returned to the model as the
// capability's data (and error), never as an infrastructure failure.
type Refusal struct {
	SchemaV   string `json:"schema/v"`
	Operation string `json:"operation"`
	Refusal   string `json:"refusal"`
	Retryable bool   `json:"retryable"`
	Detail    string `json:"detail"`
}

func (r *Refusal) Error() string { return r.Refusal + ": " + r.Detail }

// Catalog projects a registry snapshot for one caller. Key authenticates cursors (every worker
// must share it: DeriveCursorKey); Guidance is the optional guidance (nil: none).
type Catalog struct {
	Key      []byte
	Guidance *GuidanceSet
	// ProbeTimeout bounds a readiness probe in describe (default 2s).
	ProbeTimeout time.Duration
}

// Summary is one list entry: a bounded, sanitized projection of a visible capability.
type Summary struct {
	ID                   string              `json:"capability/id"`
	Version              int                 `json:"version"`
	ToolName             string              `json:"tool/name"`
	Status               registry.Status     `json:"status"`
	RemovalDeadline      string              `json:"removal/deadline,omitempty"`
	Description          string              `json:"description"`
	DescriptionTruncated bool                `json:"description/truncated,omitempty"`
	SideEffect           registry.SideEffect `json:"side-effect"`
	Network              registry.Network    `json:"network"`
	Guidance             string              `json:"guidance"`
}

// ListResult is capability-catalog-result.v1 for list. There is no total count. Continuation
// is nil on the last page.
type ListResult struct {
	SchemaV      string        `json:"schema/v"`
	Operation    string        `json:"operation"`
	Revision     string        `json:"catalog/revision"`
	Prefix       string        `json:"prefix"`
	Limit        int           `json:"limit"`
	Entries      []Summary     `json:"entries"`
	Continuation *Continuation `json:"continuation"`
	Note         string        `json:"note"`
}

// Continuation is the explicit continuation of a list page.
type Continuation struct {
	Cursor    string    `json:"cursor"`
	ExpiresAt time.Time `json:"expires_at"`
}

// NoteNotPermission is the fixed note every result carries.
const NoteNotPermission = "A catalog entry describes a capability; it grants nothing. Every call is still resolved, validated, checked against policy and, where required, confirmed by a human."

// visibleEntry is one capability the caller may see, with its projection computed once.
type visibleEntry struct {
	c        *registry.Capability
	summary  Summary
	contract string // contract digest
	gstate   string
	guidance *Bound
	gdigest  string
}

// visible evaluates disclosure first: the entries the registry-admission gate admits for the
// catalog at now (model-visible, dispatchable, admitted by status) and inside the caller's
// scope, in ascending (capability/id, version) order. Nothing of a hidden entry is read.
func (cat *Catalog) visible(reg *registry.Registry, caller Caller, now time.Time) []visibleEntry {
	var out []visibleEntry
	for _, c := range reg.Capabilities() {
		if !reg.Eligible(c, registry.UseCatalog, now).Admitted() {
			continue
		}
		if len(caller.Scope) > 0 && !slices.Contains(caller.Scope, c.ID) {
			continue
		}
		gstate, g, gd := cat.Guidance.Bind(c)
		cd, err := ContractDigest(c)
		if err != nil {
			cd = ""
		}
		desc, cut := clip(c.Airlock.Description, MaxSummaryDescription)
		out = append(out, visibleEntry{c: c, contract: cd, gstate: gstate, guidance: g, gdigest: gd, summary: Summary{
			ID: c.ID, Version: c.Version, ToolName: c.Airlock.ToolName, Status: c.Status, RemovalDeadline: c.RemovalDeadline,
			Description: desc, DescriptionTruncated: cut, SideEffect: c.Airlock.SideEffect, Network: c.Airlock.Network, Guidance: gstate,
		}})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].c.ID != out[j].c.ID {
			return out[i].c.ID < out[j].c.ID
		}
		return out[i].c.Version < out[j].c.Version
	})
	return out
}

// revision digests the caller's visible, sanitized projection: summaries, contract and
// guidance digests. Hidden entries and provider readiness do not enter it.
func revision(vs []visibleEntry) string {
	type item struct {
		Summary  Summary `json:"summary"`
		Contract string  `json:"contract"`
		Guidance string  `json:"guidance"`
	}
	items := make([]item, len(vs))
	for i, v := range vs {
		items[i] = item{v.summary, v.contract, v.gdigest}
	}
	b, _ := json.Marshal(items)
	return "cat:" + shortDigest(b)[len("sha256:"):][:32]
}

// Revision is the caller's current catalog/revision at now.
func (cat *Catalog) Revision(reg *registry.Registry, caller Caller, now time.Time) string {
	return revision(cat.visible(reg, caller, now))
}

// List returns one page of the caller's visible catalog (ListResult as JSON, at most
// MaxListBytes), or a non-retryable Refusal: stale_cursor for a cursor that is malformed,
// foreign (another principal or scope), expired, bound to another prefix or limit, or cut
// from a revision the caller no longer sees.
func (cat *Catalog) List(reg *registry.Registry, caller Caller, args ListArgs, now time.Time) (json.RawMessage, *Refusal) {
	limit := args.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	if limit > MaxLimit {
		limit = MaxLimit
	}
	vs := cat.visible(reg, caller, now)
	rev := revision(vs)
	pos := ""
	if args.Cursor != "" {
		p, kind := openCursor(cat.Key, caller, args.Prefix, limit, rev, args.Cursor, now)
		if kind != "" {
			return nil, &Refusal{SchemaV: ResultSchema, Operation: "list", Refusal: RefusalStaleCursor,
				Detail: "the cursor is " + kind + "; it will not be accepted again. Call list without a cursor to start a fresh traversal"}
		}
		pos = p
	}
	var rest []visibleEntry
	for _, v := range vs {
		if !strings.HasPrefix(v.c.ID, args.Prefix) || (pos != "" && !after(v.c, pos)) {
			continue
		}
		rest = append(rest, v)
	}
	page := rest
	if len(page) > limit {
		page = page[:limit]
	}
	for n := len(page); n >= 0; n-- {
		res := ListResult{SchemaV: ResultSchema, Operation: "list", Revision: rev, Prefix: args.Prefix, Limit: limit,
			Entries: []Summary{}, Note: NoteNotPermission}
		for _, v := range page[:n] {
			res.Entries = append(res.Entries, v.summary)
		}
		if n < len(rest) && n > 0 {
			exp := now.Add(CursorTTL).Truncate(time.Second)
			res.Continuation = &Continuation{Cursor: issueCursor(cat.Key, caller, args.Prefix, limit, rev, page[n-1].c.Key(), exp), ExpiresAt: exp.UTC()}
		}
		b, err := json.Marshal(res)
		if err == nil && len(b) <= MaxListBytes && (n > 0 || len(rest) == 0) {
			return b, nil
		}
	}
	return nil, &Refusal{SchemaV: ResultSchema, Operation: "list", Refusal: RefusalResultTooLarge,
		Detail: fmt.Sprintf("one entry does not fit in %d bytes", MaxListBytes)}
}

// after reports whether c sorts after the position key "id@version".
func after(c *registry.Capability, pos string) bool {
	i := strings.LastIndexByte(pos, '@')
	if i < 0 {
		return true
	}
	var v int
	fmt.Sscanf(pos[i+1:], "%d", &v)
	id := pos[:i]
	return c.ID > id || (c.ID == id && c.Version > v)
}

// notFound is the one answer for an unknown, hidden or private id: it names nothing.
func notFound() *Refusal {
	return &Refusal{SchemaV: ResultSchema, Operation: "describe", Refusal: RefusalNotFound,
		Detail: "no capability with this id and version is visible to this caller"}
}

// Honest states of a describe result (DescribeResult.States), each distinct.
const (
	StateVisibleUnavailable  = "visible_unavailable"
	StateAvailabilityUnknown = "availability_unknown"
	StateGuidanceMissing     = "guidance_missing"
	StateContractAmbiguous   = "contract_ambiguous"
	StateContractUnresolved  = "contract_unresolved"
	StateRevisionStale       = "revision_stale"
)

// Availability values: provider readiness, observed apart from visibility and authorization.
const (
	AvailabilityReady       = "ready"
	AvailabilityUnavailable = "unavailable"
	AvailabilityUnknown     = "unknown"
)

// DescribeResult is capability-catalog-result.v1 for describe.
type DescribeResult struct {
	SchemaV        string          `json:"schema/v"`
	Operation      string          `json:"operation"`
	Revision       string          `json:"catalog/revision"`
	RevisionState  string          `json:"revision/state"`
	States         []string        `json:"states"`
	Capability     *Summary        `json:"capability,omitempty"`
	Contract       Contract        `json:"contract"`
	Classification *Classification `json:"classification,omitempty"`
	Availability   string          `json:"availability,omitempty"`
	// AvailabilityDetail says, in Airlock's words, why a capability is unavailable when its
	// implementation knows (issue 19: an MCP server down, a tool whose live definition left
	// its pinned digest).
	AvailabilityDetail string         `json:"availability/detail,omitempty"`
	Authorization      *Authorization `json:"authorization,omitempty"`
	Guidance           GuidanceView   `json:"guidance"`
	Source             *Source        `json:"source,omitempty"`
	Note               string         `json:"note"`
}

// Contract is the request contract binding: its state, pin and the schema summary or schema.
type Contract struct {
	State    string          `json:"state"` // resolved | ambiguous | unresolved
	Ref      string          `json:"contract/ref,omitempty"`
	Digest   string          `json:"contract/digest,omitempty"`
	Include  string          `json:"include,omitempty"`
	Summary  *SchemaSummary  `json:"summary,omitempty"`
	Schema   json.RawMessage `json:"schema,omitempty"`
	Versions []int           `json:"versions,omitempty"` // ambiguous: name one with "version"
}

// SchemaSummary is the default projection of an argument schema.
type SchemaSummary struct {
	Type       string         `json:"type,omitempty"`
	Required   []string       `json:"required"`
	Properties []PropertyView `json:"properties"`
	Additional *bool          `json:"additional_properties,omitempty"`
	Truncated  bool           `json:"truncated"`
}

// PropertyView is one top-level argument property in a summary.
type PropertyView struct {
	Name     string `json:"name"`
	Type     any    `json:"type,omitempty"`
	Required bool   `json:"required"`
	Format   string `json:"format,omitempty"`
	Enum     []any  `json:"enum,omitempty"`
	Const    any    `json:"const,omitempty"`
}

// Classification is the registry-declared effect metadata (never the model's).
type Classification struct {
	SideEffect registry.SideEffect `json:"side-effect"`
	Network    registry.Network    `json:"network"`
	Known      bool                `json:"effect/known"`
}

// Authorization is what a call would need; it is a requirement, not a permission.
type Authorization struct {
	GrantsRequired []string `json:"grants/required"`
	Autonomy       string   `json:"autonomy"`
	// Caller is the policy gate's verdict for this caller today: granted, or a refusal code
	// (no_policy, policy_denied, unknown_principal, ungranted).
	Caller string `json:"caller"`
	// Confirmation is automatic or human, for a granted caller.
	Confirmation string `json:"confirmation,omitempty"`
}

// GuidanceView is the guidance part of describe: its state, and when present the bound
// guidance and its digest.
type GuidanceView struct {
	State  string `json:"state"`
	Digest string `json:"guidance/digest,omitempty"`
	*Bound
}

// Source is host-derived provenance.
type Source struct {
	Registry string `json:"registry/revision"`
	Origin   string `json:"origin"`
}

// Describe returns the caller's view of one visible capability (DescribeResult as JSON, at
// most MaxDescribeBytes) or a non-retryable Refusal. Disclosure is decided first, from the id
// (and version) alone: an unknown, hidden or private id is not_found, identically, before any
// descriptor, schema or guidance is read. Several visible versions and no version selector
// give contract state ambiguous with the versions and no schema.
func (cat *Catalog) Describe(ctx context.Context, reg *registry.Registry, caller Caller, args DescribeArgs, now time.Time) (json.RawMessage, *Refusal) {
	vs := cat.visible(reg, caller, now)
	rev := revision(vs)
	var match []visibleEntry
	for _, v := range vs {
		if v.c.ID == args.ID && (args.Version == 0 || v.c.Version == args.Version) {
			match = append(match, v)
		}
	}
	if len(match) == 0 {
		return nil, notFound()
	}
	res := DescribeResult{SchemaV: ResultSchema, Operation: "describe", Revision: rev, RevisionState: "current", States: []string{}, Note: NoteNotPermission}
	if args.Revision != "" && args.Revision != rev {
		res.RevisionState = "stale"
		res.States = append(res.States, StateRevisionStale)
	}
	if len(match) > 1 {
		res.Contract = Contract{State: "ambiguous"}
		for _, v := range match {
			res.Contract.Versions = append(res.Contract.Versions, v.c.Version)
		}
		res.States = append(res.States, StateContractAmbiguous)
		res.Guidance = GuidanceView{State: GuidanceAbsent}
		return cat.encodeDescribe(res)
	}
	v := match[0]
	c := v.c
	s := v.summary
	res.Capability = &s
	res.Source = &Source{Registry: reg.Revision(), Origin: "host registry (" + registry.SchemaVersion + ")"}
	res.Classification = &Classification{SideEffect: c.Airlock.SideEffect, Network: c.Airlock.Network,
		Known: c.Airlock.SideEffect != "" && c.Airlock.Network != ""}
	include := args.Include
	if include == "" {
		include = "summary"
	}
	res.Contract = Contract{State: "resolved", Ref: ContractRef(c), Digest: v.contract, Include: include}
	var schema map[string]any
	if len(c.Schema) == 0 || v.contract == "" || json.Unmarshal(c.Schema, &schema) != nil {
		res.Contract = Contract{State: "unresolved", Ref: ContractRef(c)}
		res.States = append(res.States, StateContractUnresolved)
	} else if include == "schema" {
		res.Contract.Schema = c.Schema
	} else {
		res.Contract.Summary = summarize(schema)
	}
	res.Availability = cat.availability(ctx, c)
	if err := c.Unavailable(); err != nil {
		res.AvailabilityDetail = err.Error()
	}
	switch res.Availability {
	case AvailabilityUnavailable:
		res.States = append(res.States, StateVisibleUnavailable)
	case AvailabilityUnknown:
		res.States = append(res.States, StateAvailabilityUnknown)
	}
	res.Authorization = authorization(reg, c, caller.Principal)
	res.Guidance = GuidanceView{State: v.gstate}
	if v.guidance != nil && res.Contract.State == "resolved" {
		res.Guidance.Digest, res.Guidance.Bound = v.gdigest, v.guidance
	} else {
		if res.Guidance.State == GuidancePresent {
			res.Guidance.State = GuidanceExcluded
		}
		res.States = append(res.States, StateGuidanceMissing)
	}
	return cat.encodeDescribe(res)
}

func (cat *Catalog) encodeDescribe(res DescribeResult) (json.RawMessage, *Refusal) {
	b, err := json.Marshal(res)
	if err != nil || len(b) > MaxDescribeBytes {
		detail := fmt.Sprintf("the description is over %d bytes", MaxDescribeBytes)
		if res.Contract.Include == "schema" {
			detail += "; describe with include summary"
		}
		return nil, &Refusal{SchemaV: ResultSchema, Operation: "describe", Refusal: RefusalResultTooLarge, Detail: detail}
	}
	return b, nil
}

func (cat *Catalog) availability(ctx context.Context, c *registry.Capability) string {
	if c.Unavailable() != nil {
		return AvailabilityUnavailable
	}
	if c.Impl.Ready == nil {
		return AvailabilityUnknown
	}
	d := cat.ProbeTimeout
	if d <= 0 {
		d = 2 * time.Second
	}
	pctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if c.Impl.Ready(pctx) != nil {
		return AvailabilityUnavailable
	}
	return AvailabilityReady
}

func authorization(reg *registry.Registry, c *registry.Capability, principal string) *Authorization {
	out := &Authorization{GrantsRequired: []string{}, Autonomy: "none"}
	if pe, ok := reg.Policy().Entry(c.Key()); ok {
		out.GrantsRequired = append(out.GrantsRequired, pe.GrantsRequired...)
		out.Autonomy = string(pe.Autonomy)
	}
	az := reg.Authorize(c, principal)
	if az.Code != "" {
		out.Caller = az.Code
		return out
	}
	out.Caller = "granted"
	out.Confirmation = "human"
	if az.Automatic {
		out.Confirmation = "automatic"
	}
	return out
}

// summarize projects a schema: its type, required names and at most MaxSummaryProperties
// top-level properties (sorted by name) with type, format, enum and const.
func summarize(schema map[string]any) *SchemaSummary {
	s := &SchemaSummary{Required: []string{}, Properties: []PropertyView{}}
	if t, ok := schema["type"].(string); ok {
		s.Type = t
	}
	req := map[string]bool{}
	if rs, ok := schema["required"].([]any); ok {
		for _, r := range rs {
			if n, ok := r.(string); ok {
				req[n] = true
				s.Required = append(s.Required, n)
			}
		}
	}
	if ap, ok := schema["additionalProperties"].(bool); ok {
		s.Additional = &ap
	}
	props, _ := schema["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > MaxSummaryProperties {
		names, s.Truncated = names[:MaxSummaryProperties], true
	}
	for _, n := range names {
		pv := PropertyView{Name: n, Required: req[n]}
		if p, ok := props[n].(map[string]any); ok {
			pv.Type = p["type"]
			pv.Format, _ = p["format"].(string)
			pv.Enum, _ = p["enum"].([]any)
			pv.Const = p["const"]
		}
		s.Properties = append(s.Properties, pv)
	}
	return s
}

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}
