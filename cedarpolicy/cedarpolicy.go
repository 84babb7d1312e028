package cedarpolicy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cedar-policy/cedar-go"
	xast "github.com/cedar-policy/cedar-go/x/exp/ast"
	"github.com/cedar-policy/cedar-go/x/exp/schema"
	"github.com/cedar-policy/cedar-go/x/exp/schema/validate"
)

// Annotations Airlock reads on a policy.
const (
	// AnnotationID names the policy in decisions and the audit (default "policy<n>").
	AnnotationID = "id"
	// AnnotationReason is a forbid's reason, told to the model and the audit.
	AnnotationReason = "reason"
	// AnnotationAsk marks a permit as an ask rule: it never permits; when no permit and no
	// forbid decides a call, the ask rules that match it name who decides (its value says
	// why, shown to approvers).
	AnnotationAsk = "ask"
	// AnnotationGroups (ask rules): comma-separated approver groups whose members decide.
	AnnotationGroups = "groups"
	// AnnotationQuorum (ask rules): how many distinct approvals the call needs (1-9).
	AnnotationQuorum = "quorum"
)

// MaxQuorum bounds an ask rule's quorum (registry.MaxQuorum's value).
const MaxQuorum = 9

// Outcome is a Cedar decision as Airlock acts on it.
type Outcome string

// Outcomes: permit runs without a human, forbid refuses at stage 3, ask is Airlock's
// argument-bound confirmation (Cedar's "no decision": neither a permit nor a forbid matched).
const (
	OutcomePermit Outcome = "permit"
	OutcomeForbid Outcome = "forbid"
	OutcomeAsk    Outcome = "ask"
)

// Decision is the verdict of a policy set on one call.
type Decision struct {
	Outcome Outcome `json:"outcome"`
	// Policies are the ids of the determining policies (the permits or forbids that matched,
	// or the ask rules that matched), sorted.
	Policies []string `json:"policies,omitempty"`
	// Reason is a forbid's reason (the @reason annotations, or the policy ids) or an ask
	// rule's @ask text.
	Reason string `json:"reason,omitempty"`
	// Groups and Quorum are an ask's approver groups (union over matching ask rules; empty:
	// every approver) and quorum (the largest; 0: one approval).
	Groups []string `json:"groups,omitempty"`
	Quorum int      `json:"quorum,omitempty"`
	// Errors are evaluation errors (a policy that could not be evaluated on this request); a
	// forbid that errs forbids (fail closed), a permit that errs does not permit.
	Errors []string `json:"errors,omitempty"`
}

// Request is one call as a policy set sees it.
type Request struct {
	// Principal is the turn's requester; Groups the groups it belongs to.
	Principal string
	Groups    []string
	// Action is the capability/id.
	Action string
	// Resource is the call's destination: the registry's declared destination name, or the
	// host of the URL a host destination's field holds ("none" when nothing leaves).
	Resource     string
	ResourceKind string
	// Args are the call's arguments (a JSON object, already validated at stage 2).
	Args json.RawMessage
	// Provenance is the origin (Origin*) of each top-level argument field; a field absent
	// here is OriginNone.
	Provenance map[string]string
	// Hosts and Domains are the URL hosts and e-mail domains in the leaving fields' values;
	// DestinationOrigin is the combined origin of the leaving fields (CombineOrigins).
	Hosts, Domains    []string
	DestinationOrigin string
	// Now is the call's time; Calls how many capability calls the turn made before this one.
	Now   time.Time
	Calls int
}

type policyMeta struct {
	id, reason, ask string
	groups          []string
	quorum          int
	forbid          bool
}

// Set is a compiled, validated Cedar policy set. It is immutable and safe for concurrent use.
type Set struct {
	source  string
	digest  string
	main    *cedar.PolicySet // permits and forbids
	asks    *cedar.PolicySet // @ask permits
	meta    map[cedar.PolicyID]policyMeta
	actions map[string]Action
	groups  []string
	schema  string
	text    []byte
}

// Source is the name of the file the set was read from.
func (s *Set) Source() string { return s.source }

// Digest is "cedar:" plus 16 hex digits of SHA-256 of the policy text: what a decision was
// made under (it enters every capability's fingerprint, so a changed policy voids pending
// approvals like any policy change).
func (s *Set) Digest() string { return s.digest }

// Groups are the groups the policies name (Group entities and @groups annotations), sorted:
// the loader checks them against the approvers file.
func (s *Set) Groups() []string { return slices.Clone(s.groups) }

// SchemaText is the Cedar schema the set was validated against.
func (s *Set) SchemaText() string { return s.schema }

// Text is the policy text as loaded.
func (s *Set) Text() []byte { return slices.Clone(s.text) }

// Len is the number of policies (ask rules included).
func (s *Set) Len() int { return len(s.meta) }

// ErrInvalid is wrapped by every Compile error.
var ErrInvalid = errors.New("cedarpolicy: invalid policy")

var groupName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// Compile parses the Cedar policies in text (file name source), validates each against the
// schema generated from actions (strict Cedar validation: an unknown action, argument,
// attribute or entity type is refused; so is an ill-typed comparison) and reads Airlock's
// annotations. Errors wrap ErrInvalid and list every problem found.
func Compile(source string, text []byte, actions []Action) (*Set, error) {
	schemaText := Schema(actions)
	var sch schema.Schema
	if err := sch.UnmarshalCedar([]byte(schemaText)); err != nil {
		return nil, fmt.Errorf("%w: generated schema: %v", ErrInvalid, err)
	}
	res, err := sch.Resolve()
	if err != nil {
		return nil, fmt.Errorf("%w: generated schema: %v", ErrInvalid, err)
	}
	list, err := cedar.NewPolicyListFromBytes(source, text)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, source, err)
	}
	s := &Set{source: source, main: cedar.NewPolicySet(), asks: cedar.NewPolicySet(), meta: map[cedar.PolicyID]policyMeta{},
		actions: map[string]Action{}, schema: schemaText, text: slices.Clone(text)}
	for _, a := range actions {
		s.actions[a.ID] = a
	}
	sum := sha256.Sum256(text)
	s.digest = "cedar:" + hex.EncodeToString(sum[:8])
	v := validate.New(res, validate.WithStrict())
	var problems []string
	groups := map[string]bool{}
	for i, p := range list {
		ann := p.Annotations()
		m := policyMeta{id: fmt.Sprintf("policy%d", i), forbid: p.Effect() == cedar.Forbid}
		if id, ok := ann[AnnotationID]; ok {
			m.id = string(id)
		}
		where := fmt.Sprintf("%s: policy %q (line %d)", source, m.id, p.Position().Line)
		bad := func(format string, a ...any) { problems = append(problems, where+": "+fmt.Sprintf(format, a...)) }
		if _, dup := s.meta[cedar.PolicyID(m.id)]; dup {
			bad("the id is used twice")
			continue
		}
		if err := v.Policy(m.id, (*xast.Policy)(p.AST())); err != nil {
			bad("%v", err)
		}
		for k, val := range ann {
			switch string(k) {
			case AnnotationID:
			case AnnotationReason:
				m.reason = string(val)
			case AnnotationAsk:
				m.ask = string(val)
				if m.ask == "" {
					m.ask = "asked by policy " + m.id
				}
			case AnnotationGroups:
				for _, g := range strings.Split(string(val), ",") {
					g = strings.TrimSpace(g)
					if !groupName.MatchString(g) {
						bad("@groups names %q, not a group name", g)
						continue
					}
					m.groups = append(m.groups, g)
					groups[g] = true
				}
			case AnnotationQuorum:
				q, err := strconv.Atoi(string(val))
				if err != nil || q < 1 || q > MaxQuorum {
					bad("@quorum %q is not a number from 1 to %d", val, MaxQuorum)
				}
				m.quorum = q
			default:
				bad("unknown annotation @%s (Airlock reads @id, @reason, @ask, @groups, @quorum)", k)
			}
		}
		if _, isAsk := ann[AnnotationAsk]; isAsk && m.forbid {
			bad("@ask is for permit rules (a forbid refuses)")
		}
		if _, isAsk := ann[AnnotationAsk]; !isAsk && (len(m.groups) > 0 || m.quorum > 0) {
			bad("@groups and @quorum belong to @ask rules")
		}
		if _, ok := ann[AnnotationReason]; ok && !m.forbid {
			bad("@reason belongs to forbid rules")
		}
		for _, g := range referencedGroups(p) {
			groups[g] = true
		}
		s.meta[cedar.PolicyID(m.id)] = m
		if _, isAsk := ann[AnnotationAsk]; isAsk {
			s.asks.Add(cedar.PolicyID(m.id), p)
		} else {
			s.main.Add(cedar.PolicyID(m.id), p)
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w:\n  %s", ErrInvalid, strings.Join(problems, "\n  "))
	}
	for g := range groups {
		s.groups = append(s.groups, g)
	}
	sort.Strings(s.groups)
	return s, nil
}

// referencedGroups are the ids of the Group entities a policy names (scope or expression).
func referencedGroups(p *cedar.Policy) []string {
	b, err := p.MarshalJSON()
	if err != nil {
		return nil
	}
	var v any
	if json.Unmarshal(b, &v) != nil {
		return nil
	}
	var out []string
	var walk func(any)
	walk = func(x any) {
		switch t := x.(type) {
		case map[string]any:
			if typ, ok := t["type"].(string); ok && typ == EntityGroup {
				if id, ok := t["id"].(string); ok {
					out = append(out, id)
				}
			}
			for _, c := range t {
				walk(c)
			}
		case []any:
			for _, c := range t {
				walk(c)
			}
		}
	}
	walk(v)
	return out
}

// Decide evaluates r: a forbid that matches (or cannot be evaluated) forbids; else a permit
// that matches permits; else the call is asked, with the groups and quorum of the matching
// ask rules (an ask rule that cannot be evaluated counts as matching: fail closed).
func (s *Set) Decide(r Request) Decision {
	a, known := s.actions[r.Action]
	if !known {
		return Decision{Outcome: OutcomeForbid, Reason: fmt.Sprintf("the Cedar policy's schema has no action %q", r.Action)}
	}
	req, ents := s.request(a, r)
	dec, diag := cedar.Authorize(s.main, ents, req)
	var d Decision
	var erredForbids []string
	for _, e := range diag.Errors {
		d.Errors = append(d.Errors, e.String())
		if s.meta[e.PolicyID].forbid {
			erredForbids = append(erredForbids, string(e.PolicyID))
		}
	}
	if len(erredForbids) > 0 {
		d.Outcome, d.Policies = OutcomeForbid, erredForbids
		d.Reason = "forbid policy " + strings.Join(erredForbids, ", ") + " could not be evaluated on this call (refused: fail closed)"
		return d
	}
	if dec == cedar.Allow {
		d.Outcome = OutcomePermit
		for _, rs := range diag.Reasons {
			d.Policies = append(d.Policies, string(rs.PolicyID))
		}
		sort.Strings(d.Policies)
		return d
	}
	if len(diag.Reasons) > 0 {
		d.Outcome = OutcomeForbid
		var reasons []string
		for _, rs := range diag.Reasons {
			d.Policies = append(d.Policies, string(rs.PolicyID))
		}
		sort.Strings(d.Policies)
		for _, id := range d.Policies {
			m := s.meta[cedar.PolicyID(id)]
			if m.reason != "" {
				reasons = append(reasons, m.reason)
			} else {
				reasons = append(reasons, "forbidden by policy "+id)
			}
		}
		d.Reason = strings.Join(reasons, "; ")
		return d
	}
	d.Outcome = OutcomeAsk
	_, adiag := cedar.Authorize(s.asks, ents, req)
	matched := map[string]bool{}
	for _, rs := range adiag.Reasons {
		matched[string(rs.PolicyID)] = true
	}
	for _, e := range adiag.Errors {
		matched[string(e.PolicyID)] = true
		d.Errors = append(d.Errors, e.String())
	}
	var why []string
	for id := range matched {
		d.Policies = append(d.Policies, id)
	}
	sort.Strings(d.Policies)
	for _, id := range d.Policies {
		m := s.meta[cedar.PolicyID(id)]
		why = append(why, m.ask)
		for _, g := range m.groups {
			if !slices.Contains(d.Groups, g) {
				d.Groups = append(d.Groups, g)
			}
		}
		d.Quorum = max(d.Quorum, m.quorum)
	}
	sort.Strings(d.Groups)
	d.Reason = strings.Join(why, "; ")
	return d
}

// request builds the Cedar request and entities of r.
func (s *Set) request(a Action, r Request) (cedar.Request, cedar.EntityMap) {
	principal := cedar.NewEntityUID(EntityUser, cedar.String(r.Principal))
	resource := cedar.NewEntityUID(EntityDestination, cedar.String(r.Resource))
	var parents []cedar.EntityUID
	ents := cedar.EntityMap{}
	for _, g := range r.Groups {
		uid := cedar.NewEntityUID(EntityGroup, cedar.String(g))
		parents = append(parents, uid)
		ents[uid] = cedar.Entity{UID: uid}
	}
	ents[principal] = cedar.Entity{UID: principal, Parents: cedar.NewEntityUIDSet(parents...)}
	ents[resource] = cedar.Entity{UID: resource, Attributes: cedar.NewRecord(cedar.RecordMap{"kind": cedar.String(r.ResourceKind)})}

	args := cedar.RecordMap{}
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(r.Args))
	dec.UseNumber()
	if dec.Decode(&obj) == nil {
		for _, arg := range a.Args {
			raw, ok := obj[arg.Name]
			if !ok {
				continue
			}
			if v, ok := cedarValue(arg.Type, raw); ok {
				args[cedar.String(arg.Name)] = v
			}
		}
	}
	prov := cedar.RecordMap{}
	for _, f := range a.Fields {
		o := r.Provenance[f]
		if o == "" {
			o = OriginNone
		}
		prov[cedar.String(f)] = cedar.String(o)
	}
	origin := r.DestinationOrigin
	if origin == "" {
		origin = OriginNone
	}
	now := r.Now.UTC()
	ctx := cedar.NewRecord(cedar.RecordMap{
		"args":       cedar.NewRecord(args),
		"provenance": cedar.NewRecord(prov),
		"destination": cedar.NewRecord(cedar.RecordMap{
			"hosts": stringSet(r.Hosts), "domains": stringSet(r.Domains), "origin": cedar.String(origin)}),
		"turn": cedar.NewRecord(cedar.RecordMap{
			"principal": cedar.String(r.Principal), "calls": cedar.Long(r.Calls),
			"hour": cedar.Long(now.Hour()), "weekday": cedar.Long(now.Weekday()), "unix": cedar.Long(now.Unix())}),
	})
	action := cedar.NewEntityUID("Action", cedar.String(a.ID))
	class := a.Class
	if class == "" {
		class = ClassWrite
	}
	classUID := cedar.NewEntityUID("Action", cedar.String(class))
	ents[action] = cedar.Entity{UID: action, Parents: cedar.NewEntityUIDSet(classUID)}
	if class == ClassLocalRead || class == ClassExternalRead {
		read := cedar.NewEntityUID("Action", cedar.String(ClassRead))
		ents[classUID] = cedar.Entity{UID: classUID, Parents: cedar.NewEntityUIDSet(read)}
		ents[read] = cedar.Entity{UID: read}
	} else {
		ents[classUID] = cedar.Entity{UID: classUID}
	}
	return cedar.Request{Principal: principal, Action: action, Resource: resource, Context: ctx}, ents
}

func stringSet(ss []string) cedar.Set {
	vs := make([]cedar.Value, 0, len(ss))
	for _, s := range ss {
		vs = append(vs, cedar.String(s))
	}
	return cedar.NewSet(vs...)
}

// cedarValue converts one argument value to its Cedar type; ok is false for a value of
// another shape (it is left out: a policy reading it fails closed).
func cedarValue(t ArgType, raw json.RawMessage) (cedar.Value, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	switch t {
	case TypeString:
		s, ok := v.(string)
		return cedar.String(s), ok
	case TypeBool:
		b, ok := v.(bool)
		return cedar.Boolean(b), ok
	case TypeLong:
		n, ok := v.(json.Number)
		if !ok {
			return nil, false
		}
		l, ok := roundUp(n)
		return cedar.Long(l), ok
	case TypeSetString, TypeSetLong:
		xs, ok := v.([]any)
		if !ok {
			return nil, false
		}
		vs := make([]cedar.Value, 0, len(xs))
		for _, x := range xs {
			switch e := x.(type) {
			case string:
				if t != TypeSetString {
					return nil, false
				}
				vs = append(vs, cedar.String(e))
			case json.Number:
				l, ok := roundUp(e)
				if t != TypeSetLong || !ok {
					return nil, false
				}
				vs = append(vs, cedar.Long(l))
			default:
				return nil, false
			}
		}
		return cedar.NewSet(vs...), true
	}
	return nil, false
}

// roundUp is n as a Long, a fraction rounded away from zero; ok is false outside int64.
func roundUp(n json.Number) (int64, bool) {
	if i, err := n.Int64(); err == nil {
		return i, true
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) >= 9e18 {
		return 0, false
	}
	if f > 0 {
		return int64(math.Ceil(f)), true
	}
	return int64(math.Floor(f)), true
}

// CombineOrigins is the origin of several values taken together, the least trusted wins:
// untrusted if any is untrusted, else none if any is none, else both if any is both, else user
// (none for no values).
func CombineOrigins(origins ...string) string {
	if len(origins) == 0 {
		return OriginNone
	}
	for _, want := range []string{OriginUntrusted, OriginNone, OriginBoth} {
		if slices.Contains(origins, want) {
			return want
		}
	}
	return OriginUser
}
