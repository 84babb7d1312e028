package presentation

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/provenance"
	"github.com/airlock-dev/airlock/registry"
)

// DefaultLimit is the number of runes of visible text a value keeps before it is cut (Text.Full
// keeps the whole visible form).
const DefaultLimit = 240

// Statuses of a confirmation (Status.State).
const (
	// StatePending: undecided and not expired; the viewer (if any) has not approved it.
	StatePending = "pending"
	// StateVoted: the viewer's approval counted towards a quorum that still needs more.
	StateVoted = "voted"
	// StateApproved: approved (the quorum reached); Status.Outcome says what the execution did.
	StateApproved = "approved"
	// StateDenied: an approver denied it (or edited it: the call as proposed never runs).
	StateDenied = "denied"
	// StateExpired: nobody decided it in time; the call never runs.
	StateExpired = "expired"
)

// Provenance origins (Origin.Origin), in the words policies read.
const (
	OriginUser      = "user"
	OriginUntrusted = "untrusted"
	OriginBoth      = "both"
	OriginNone      = "none"
)

// Text is one hostile string made fit to show: Text is the visible form (hidden runes as
// <U+XXXX>) cut to the limit; Full, set only when it was cut, is the whole visible form; Flags
// name what was made visible or deserves a second look (display.Flag values, e.g.
// "bidi_control", "invisible", "control", "mixed_script_host", "truncated"); Hosts are the
// ASCII (punycode) forms of non-ASCII hosts in it.
type Text struct {
	Text  string   `json:"text"`
	Full  string   `json:"full,omitempty"`
	Flags []string `json:"flags,omitempty"`
	Hosts []string `json:"hosts,omitempty"`
}

// Line is t on one line: the text, the ASCII form of its hosts and its flags in brackets.
func (t Text) Line() string {
	s := t.Text
	for _, h := range t.Hosts {
		s += " [host " + h + "]"
	}
	if len(t.Flags) > 0 {
		s += " [flags: " + strings.Join(t.Flags, ", ") + "]"
	}
	return s
}

// Truncated reports whether t was cut.
func (t Text) Truncated() bool { return t.Full != "" }

// Field is one argument leaf or one declared field that leaves the machine: its path (keys
// made visible and quoted when not plain) and its value.
type Field struct {
	Path  string `json:"path"`
	Value Text   `json:"value"`
	// Kind, for a guessed egress field (Destination.Guessed), is url, host, recipient or amount.
	Kind string `json:"kind,omitempty"`
}

// Line is f as "path = value [flags]".
func (f Field) Line() string { return f.Path + " = " + f.Value.Line() }

// Host is one host the call contacts, as the HTTP client dials it.
type Host struct {
	// Host is the form contacted (lower-case ASCII, IDNA as xn--); empty with Error.
	Host Text `json:"host"`
	// Written is the form the arguments or registry wrote, set only when it differs.
	Written *Text `json:"written,omitempty"`
	// Field is the argument it came from ("" for a host the registry fixes).
	Field string `json:"field,omitempty"`
	// Error says why no host could be derived (the call goes to an unknown host).
	Error *Text `json:"error,omitempty"`
}

// Line is h on one line, with "host_differs" where the written form is not the one contacted.
func (h Host) Line() string {
	from := ""
	if h.Field != "" {
		from = " (from " + h.Field + ")"
	}
	switch {
	case h.Error != nil:
		return "unknown" + from + ": " + h.Error.Line() + "  [host_differs]"
	case h.Written != nil:
		return h.Host.Line() + from + "  [host_differs: written as " + h.Written.Line() + "; " + h.Host.Text + " is the host contacted]"
	}
	return h.Host.Line() + from
}

// Destination is where the call sends what (registry.Disclosure), or, for a confirmation
// stored without one, what the argument names suggest (Guessed).
type Destination struct {
	// Line is the destination in one line: "host tickets.example", "server NAME", "none", or
	// "unknown" when the confirmation carries no disclosure.
	Line string `json:"line"`
	// Kind is the registry's destination kind (host, server, system, none; "" when unknown).
	Kind string `json:"kind,omitempty"`
	// Name is the declared destination name ("" for any host or none).
	Name  *Text  `json:"name,omitempty"`
	Hosts []Host `json:"hosts,omitempty"`
	// Sends are the declared fields this call sends, with their values (none: nothing of the
	// arguments leaves); guessed from argument names when Guessed.
	Sends   []Field `json:"sends"`
	Guessed bool    `json:"guessed,omitempty"`
}

// Origin is where one argument value came from (internal/provenance).
type Origin struct {
	Path  string `json:"path"`
	Label Text   `json:"label"`
	// Origin is user, untrusted, both or none ("" for the "provenance unavailable" line).
	Origin string `json:"origin"`
	// UntrustedOnly marks a value found only in tool results: the mark of a planted value.
	UntrustedOnly bool `json:"untrusted_only"`
	Unattributed  bool `json:"unattributed,omitempty"`
}

// Line is o as "path: ⚠ label" (the mark first for a value found only in untrusted data).
func (o Origin) Line() string {
	s := o.Label.Line()
	if o.UntrustedOnly {
		s = "⚠ " + s
	}
	if o.Path != "" {
		s = o.Path + ": " + s
	}
	return s
}

// Requester is who asked for the turn, as the worker proved it from the request's attestation.
type Requester struct {
	Principal Text `json:"principal"`
	Client    Text `json:"client"`
	// Attested is false when no attested requester is known for the turn.
	Attested bool `json:"attested"`
}

// Line is r on one line ("alice (attested by client app)" or "(not attested)").
func (r Requester) Line() string {
	if !r.Attested {
		if r.Principal.Text != "" {
			return r.Principal.Line() + " (not attested)"
		}
		return "(not attested)"
	}
	return r.Principal.Line() + " (attested by client " + r.Client.Line() + ")"
}

// Quorum is who may decide and how many approvals the call needs.
type Quorum struct {
	// Groups are the approver groups that may decide it (empty: any approver).
	Groups []string `json:"groups"`
	// Needed is how many distinct approvals it needs (1 without a quorum).
	Needed int `json:"needed"`
	// Approvals are the approvers whose approval counted so far, in the order given.
	Approvals []string `json:"approvals"`
	// DistinctFromRequester: only an approver other than the turn's requester may decide it
	// (policy "approval/distinct-approver", four eyes).
	DistinctFromRequester bool `json:"distinct_from_requester"`
}

// Remaining is how many more approvals the call needs (0 once reached).
func (q Quorum) Remaining() int { return max(q.Needed-len(q.Approvals), 0) }

// Line is the quorum in words every surface prints the same: "2 needed, 1 so far (erin)",
// "1 needed, none so far".
func (q Quorum) Line() string {
	so := "none so far"
	if len(q.Approvals) > 0 {
		so = fmt.Sprintf("%d so far (%s)", len(q.Approvals), strings.Join(q.Approvals, ", "))
	}
	return fmt.Sprintf("%d needed, %s", q.Needed, so)
}

// Deciders is who may decide, in words: "any approver" or "members of finance, ops", followed
// by " other than the requester" when DistinctFromRequester.
func (q Quorum) Deciders() string {
	who := "any approver"
	if len(q.Groups) > 0 {
		who = "members of " + strings.Join(q.Groups, ", ")
	}
	if q.DistinctFromRequester {
		who += " other than the requester"
	}
	return who
}

// Status is where the confirmation stands, for the viewer when one is named.
type Status struct {
	// State is pending, voted, approved, denied or expired.
	State string `json:"state"`
	// Outcome is what the execution of an approved call did: executed, failed,
	// outcome_unknown (it started and its result was lost: never run again) or rejected (a
	// check after the approval refused it); "" while it runs or before a decision. For
	// denied and expired it repeats the state.
	Outcome string `json:"outcome,omitempty"`
	// DecidedBy is who decided (and how they proved it); DecidedAt when.
	DecidedBy *Text      `json:"decided_by,omitempty"`
	DecidedAt *time.Time `json:"decided_at,omitempty"`
	// Reason is a denial's reason (the model receives it).
	Reason *Text `json:"reason,omitempty"`
	// Viewer is the approver the status was computed for ("" for none); ViewerVoted says
	// their approval counted.
	Viewer      string `json:"viewer,omitempty"`
	ViewerVoted bool   `json:"viewer_voted,omitempty"`
}

// Confirmation is the canonical presentation of one confirmation. Every string field a model,
// tool result, client or registry layer wrote is already shown through internal/display.
type Confirmation struct {
	ID string `json:"id"`
	// TurnID is the turn's workflow id ("turn/<conversation>/<seq>": a client chose the
	// conversation), Conversation its conversation, Seq the proposal's number in the turn and
	// CallID the model's call id.
	TurnID       Text   `json:"turn_id"`
	Conversation string `json:"conversation"`
	Seq          int    `json:"seq"`
	CallID       Text   `json:"call_id"`
	// Capability is the capability id and Version its version ("web.fetch", 1); Tool the
	// model's tool name.
	Capability string `json:"capability"`
	Version    int    `json:"version"`
	Tool       Text   `json:"tool"`
	// Description, SideEffect and Network are the registry's (empty when the confirmation
	// carries no disclosure).
	Description Text   `json:"description"`
	SideEffect  string `json:"side_effect,omitempty"`
	Network     string `json:"network,omitempty"`
	// Destination is where the call sends what.
	Destination Destination `json:"destination"`
	// Arguments are the call's argument leaves; ArgsDigest the canonical digest a decision
	// names as the arguments it was made on.
	Arguments  []Field `json:"arguments"`
	ArgsDigest string  `json:"args_digest"`
	// Provenance is where each argument value came from.
	Provenance []Origin `json:"provenance"`
	// UserRequest is the turn's user message that asked (a client's text; "" when unknown).
	UserRequest Text      `json:"user_request"`
	Requester   Requester `json:"requester"`
	Quorum      Quorum    `json:"quorum"`
	// PasskeyRequired: a decision counts only with the approver's passkey.
	PasskeyRequired bool      `json:"passkey_required"`
	CreatedAt       time.Time `json:"created_at"`
	ExpiresAt       time.Time `json:"expires_at"`
	Status          Status    `json:"status"`
	// Flags is the union of the display flags of every value shown (sorted).
	Flags []string `json:"flags"`
}

// Ref is "capability@version".
func (c Confirmation) Ref() string { return fmt.Sprintf("%s@%d", c.Capability, c.Version) }

// Input is what Build reads: a confirmation as stored, and what surrounds it.
type Input struct {
	ID, WorkflowID, CallID string
	Seq                    int
	CapabilityID           string
	Version                int
	// ToolName is the model's tool name (the stored display line's first word).
	ToolName   string
	Arguments  json.RawMessage
	ArgsDigest string
	// Disclosure is the registry.Disclosure stored with the confirmation (nil: none).
	Disclosure *registry.Disclosure
	// Provenance is the stored provenance report (JSON; nil: none).
	Provenance  json.RawMessage
	UserRequest string
	// RequesterPrincipal and RequesterClient are the attested requester ("" principal: none
	// attested); ClaimedPrincipal, the principal the turn's starter named, is shown as not
	// attested when no attested one is known.
	RequesterPrincipal, RequesterClient, ClaimedPrincipal string
	Groups                                                []string
	// Quorum is the approvals needed (0 is read as 1); Approvals who counted so far.
	Quorum          int
	Approvals       []string
	PasskeyRequired bool
	// DistinctApprover: the policy requires an approver other than the requester (four eyes).
	DistinctApprover bool
	CreatedAt        time.Time
	ExpiresAt        time.Time
	// Decision is the stored decision (approved, denied, expired; "" while undecided), with
	// who decided (DecidedBy, proof included), when and why.
	Decision, DecidedBy, Reason string
	DecidedAt                   *time.Time
	// Outcome is the call's audited outcome once known (executed, failed, outcome_unknown,
	// rejected, denied, expired; "" while it runs).
	Outcome string
	// Viewer is the approver the status is for ("" for none: notices, operators).
	Viewer string
	// Now decides whether an undecided confirmation has expired (zero: never judged expired).
	Now time.Time
	// Limit is the runes of visible text a value keeps before it is cut (0: DefaultLimit).
	Limit int
}

// Build makes the presentation of in. It never fails: arguments that are not JSON are one
// field named "(arguments)", an unreadable provenance report one line saying so.
func Build(in Input) Confirmation {
	limit := in.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	flags := map[string]bool{}
	text := func(s string) Text { return fromValue(display.Show(s, limit), flags) }
	word := func(s string) string { return display.Visible(display.OneLine(s)) }
	conv, _ := splitTurnID(in.WorkflowID)
	c := Confirmation{
		ID: word(in.ID), TurnID: text(in.WorkflowID), Conversation: word(conv), Seq: in.Seq, CallID: text(in.CallID),
		Capability: word(in.CapabilityID), Version: in.Version, Tool: text(in.ToolName), ArgsDigest: word(in.ArgsDigest),
		UserRequest: text(in.UserRequest), PasskeyRequired: in.PasskeyRequired,
		CreatedAt: in.CreatedAt.UTC(), ExpiresAt: in.ExpiresAt.UTC(),
		Arguments: []Field{}, Provenance: []Origin{},
	}
	if fs, err := display.Arguments(in.Arguments, limit); err == nil {
		for _, f := range fs {
			c.Arguments = append(c.Arguments, Field{Path: f.Path, Value: fromValue(f.Value, flags)})
		}
	} else if len(in.Arguments) > 0 {
		c.Arguments = append(c.Arguments, Field{Path: "(arguments)", Value: text(string(in.Arguments))})
	}
	c.Destination = Destination{Line: "unknown", Sends: []Field{}}
	if d := in.Disclosure; d != nil {
		c.Description = text(d.Description)
		c.SideEffect, c.Network = word(string(d.SideEffect)), word(string(d.Network))
		c.Destination.Kind = word(string(d.Destination.Kind))
		if c.Destination.Kind != "" {
			c.Destination.Line = c.Destination.Kind
		}
		if d.Destination.Name != "" && d.Destination.Name != registry.AnyHost {
			n := text(d.Destination.Name)
			c.Destination.Name = &n
			c.Destination.Line += " " + n.Text
		}
		for _, h := range d.Hosts {
			x := Host{Host: text(h.Host), Field: word(h.Field)}
			if h.Written != "" {
				w := text(h.Written)
				x.Written = &w
				flags[string(display.FlagHostDiffers)] = true
			}
			if h.Error != "" {
				e := text(h.Error)
				x.Error = &e
				flags[string(display.FlagHostDiffers)] = true
			}
			c.Destination.Hosts = append(c.Destination.Hosts, x)
		}
		for _, lf := range d.Leaving {
			c.Destination.Sends = append(c.Destination.Sends, Field{Path: word(lf.Field), Value: text(leafText(lf.Value))})
		}
	} else if ls, err := display.Egress(in.Arguments, limit); err == nil {
		c.Destination.Guessed = true
		for _, l := range ls {
			c.Destination.Sends = append(c.Destination.Sends, Field{Path: l.Path, Kind: l.Kind, Value: fromValue(l.Value, flags)})
		}
	}
	for _, l := range provenance.Lines(in.Provenance) {
		c.Provenance = append(c.Provenance, Origin{Path: display.Show(l.Path, limit).Short, Label: text(l.Label), Origin: word(l.Origin),
			UntrustedOnly: l.Untrusted, Unattributed: l.Unattributed})
	}
	switch {
	case in.RequesterPrincipal != "":
		c.Requester = Requester{Principal: text(in.RequesterPrincipal), Client: text(in.RequesterClient), Attested: true}
	case in.ClaimedPrincipal != "":
		c.Requester = Requester{Principal: text(in.ClaimedPrincipal)}
	}
	c.Quorum = Quorum{Groups: []string{}, Needed: max(in.Quorum, 1), Approvals: []string{}, DistinctFromRequester: in.DistinctApprover}
	for _, g := range in.Groups {
		c.Quorum.Groups = append(c.Quorum.Groups, word(g))
	}
	for _, a := range in.Approvals {
		c.Quorum.Approvals = append(c.Quorum.Approvals, word(a))
	}
	c.Status = status(in, text)
	c.Flags = make([]string, 0, len(flags))
	for f := range flags {
		c.Flags = append(c.Flags, f)
	}
	sort.Strings(c.Flags)
	return c
}

// status is where in stands for its viewer.
func status(in Input, text func(string) Text) Status {
	s := Status{Viewer: display.Visible(in.Viewer), DecidedAt: in.DecidedAt}
	for _, a := range in.Approvals {
		if in.Viewer != "" && a == in.Viewer {
			s.ViewerVoted = true
		}
	}
	if in.DecidedBy != "" {
		t := text(in.DecidedBy)
		s.DecidedBy = &t
	}
	if in.Reason != "" {
		t := text(in.Reason)
		s.Reason = &t
	}
	switch in.Decision {
	case "approved":
		s.State, s.Outcome = StateApproved, in.Outcome
		if s.Outcome == StateApproved {
			s.Outcome = ""
		}
	case "denied":
		s.State, s.Outcome = StateDenied, StateDenied
	case "expired":
		s.State, s.Outcome = StateExpired, StateExpired
	case "":
		switch {
		case !in.Now.IsZero() && !in.Now.Before(in.ExpiresAt):
			s.State, s.Outcome = StateExpired, StateExpired
		case s.ViewerVoted:
			s.State = StateVoted
		default:
			s.State = StatePending
		}
	default:
		s.State = display.Visible(in.Decision)
	}
	return s
}

// StatusLine is the status in plain words, the same on every surface: "waiting: 2 needed, 1 so far
// (erin)", "your approval counted; 1 more needed from finance", "approved by bob; it ran",
// "denied by bob: wrong account", "expired: nobody decided in time; the call never ran".
func (c Confirmation) StatusLine() string {
	s := c.Status
	by := ""
	if s.DecidedBy != nil {
		by = " by " + s.DecidedBy.Line()
	}
	switch s.State {
	case StatePending:
		return "waiting for a decision: " + c.Quorum.Line()
	case StateVoted:
		from := ""
		if len(c.Quorum.Groups) > 0 {
			from = " from " + strings.Join(c.Quorum.Groups, " or ")
		}
		return fmt.Sprintf("your approval counted; %d more needed%s", c.Quorum.Remaining(), from)
	case StateApproved:
		switch s.Outcome {
		case "executed":
			return "approved" + by + "; it ran"
		case "failed":
			return "approved" + by + "; it ran and failed"
		case "outcome_unknown":
			return "approved" + by + "; it started but its result was lost (it is never run again)"
		case "rejected":
			return "approved" + by + "; refused by a check after the approval, it did not run"
		case "":
			return "approved" + by + "; running"
		}
		return "approved" + by + "; " + display.Visible(s.Outcome)
	case StateDenied:
		r := ""
		if s.Reason != nil {
			r = ": " + s.Reason.Line()
		}
		return "denied" + by + r + "; the call never ran"
	case StateExpired:
		return "expired: nobody decided in time; the call never ran"
	}
	return display.Visible(s.State)
}

// Decided reports whether the confirmation is decided or expired (no decision is possible).
func (c Confirmation) Decided() bool {
	return c.Status.State != StatePending && c.Status.State != StateVoted
}

// fromValue is v as a Text, its flags also collected into flags.
func fromValue(v display.Value, flags map[string]bool) Text {
	t := Text{Text: v.Short, Hosts: v.Hosts}
	if v.Has(display.FlagTruncated) {
		t.Full = v.Full
	}
	for _, f := range v.Flags {
		t.Flags = append(t.Flags, string(f))
		flags[string(f)] = true
	}
	return t
}

// leafText is a JSON value as shown: a string's text, any other value's JSON.
func leafText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// splitTurnID splits "turn/<conversation>/<seq>" (conversations may hold "/").
func splitTurnID(id string) (string, string) {
	rest := strings.TrimPrefix(id, "turn/")
	if i := strings.LastIndexByte(rest, '/'); i >= 0 {
		return rest[:i], rest[i+1:]
	}
	return rest, ""
}

// Brief is c without the whole forms of cut values (every Text.Full cleared; Truncated then
// reads false; the "truncated" flag stays in Flags): what leaves Airlock for a channel that is not
// signed in (webhook, Slack, e-mail notices) carries each value only to its limit, and the
// whole argument or user request stays on the signed-in surfaces. Slices are copied, so c is
// unchanged.
func (c Confirmation) Brief() Confirmation {
	brief := func(t *Text) {
		if t != nil {
			t.Full = ""
		}
	}
	briefP := func(t *Text) *Text {
		if t == nil {
			return nil
		}
		cp := *t
		cp.Full = ""
		return &cp
	}
	for _, t := range []*Text{&c.TurnID, &c.CallID, &c.Tool, &c.Description, &c.UserRequest, &c.Requester.Principal, &c.Requester.Client} {
		brief(t)
	}
	c.Arguments = append([]Field(nil), c.Arguments...)
	for i := range c.Arguments {
		brief(&c.Arguments[i].Value)
	}
	c.Provenance = append([]Origin(nil), c.Provenance...)
	for i := range c.Provenance {
		brief(&c.Provenance[i].Label)
	}
	c.Destination.Name = briefP(c.Destination.Name)
	c.Destination.Sends = append([]Field(nil), c.Destination.Sends...)
	for i := range c.Destination.Sends {
		brief(&c.Destination.Sends[i].Value)
	}
	c.Destination.Hosts = append([]Host(nil), c.Destination.Hosts...)
	for i := range c.Destination.Hosts {
		h := &c.Destination.Hosts[i]
		brief(&h.Host)
		h.Written, h.Error = briefP(h.Written), briefP(h.Error)
	}
	c.Status.DecidedBy, c.Status.Reason = briefP(c.Status.DecidedBy), briefP(c.Status.Reason)
	return c
}
