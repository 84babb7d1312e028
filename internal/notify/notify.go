// Package notify tells approvers that a call waits for them (issue 23): a Notice per new
// pending confirmation, reminder and escalation, owed to the channels the notify file routes
// it to, kept in the store's outbox (store.Delivery) by the activity that issues the
// confirmation and delivered by a Dispatcher in the worker with retries and backoff, outside
// the turn and its history, so a slow or dead channel never delays a turn.
//
// A Notice is made fit to show when it is built (internal/display: hidden characters visible,
// values bounded) and never carries a token, a sealed token or a decision MAC: it names the
// confirmation and links to the signed-in approver page, where deciding happens. Channel
// drivers (internal/notify/webhook, slack, email) render it inert for their medium.
package notify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/present"
	"github.com/airlock-dev/airlock/internal/provenance"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/presentation"
	"github.com/airlock-dev/airlock/registry"
)

// Notice kinds: the outbox's kind of each delivery (store.Delivery.Kind, the kind label of
// the metrics, part of the delivery id). The JSON a channel receives names the event in the
// words of the schema airlock.notice.v1 (EventOf).
const (
	// KindPending: a new confirmation waits for a decision.
	KindPending = "pending"
	// KindReminder: the confirmation is still undecided at the route's remind_at fraction of
	// its time to expiry.
	KindReminder = "reminder"
	// KindEscalation: still undecided at the route's escalate_at fraction; sent to the route's
	// escalate_to channels.
	KindEscalation = "escalation"
	// KindProposal: a new agent proposal (memory change, self-correction, focus) waits for a
	// decision on the proposals page; ConfirmationID then holds the proposal id.
	KindProposal = "proposal"
	// KindDecided: the confirmation was decided (approved, with the execution's outcome, or
	// denied); sent once to the channels told of it.
	KindDecided = "decided"
	// KindExpired: nobody decided the confirmation in time; sent once to the channels told of it.
	KindExpired = "expired"
	// KindMCPToolChanged: a pinned MCP tool's live definition changed upstream or the tool
	// vanished (it is neither offered nor called until an operator imports it again); sent once
	// per tool and live digest.
	KindMCPToolChanged = "mcp_tool_changed"
)

// SchemaV1 names the JSON shape of a notice (docs/notice.v1.schema.json): what the webhook
// channel posts, and what the outbox stores.
const SchemaV1 = "airlock.notice.v1"

// Events of airlock.notice.v1 (Notice.Kind).
const (
	EventRequested      = "confirmation_requested"
	EventReminder       = "confirmation_reminder"
	EventEscalated      = "confirmation_escalated"
	EventDecided        = "confirmation_decided"
	EventExpired        = "confirmation_expired"
	EventMCPToolChanged = "mcp_tool_changed"
	EventProposal       = "proposal_requested"
)

// EventOf is the airlock.notice.v1 event of an outbox kind ("" for an unknown kind).
func EventOf(kind string) string {
	switch kind {
	case KindPending:
		return EventRequested
	case KindReminder:
		return EventReminder
	case KindEscalation:
		return EventEscalated
	case KindDecided:
		return EventDecided
	case KindExpired:
		return EventExpired
	case KindMCPToolChanged:
		return EventMCPToolChanged
	case KindProposal:
		return EventProposal
	}
	return ""
}

// valueLimit bounds each model-written value a notice shows (runes of visible text); the card
// behind the link shows it all.
const valueLimit = 200

// maxFields bounds the argument lines of one notice.
const maxFields = 20

// Notice is what one channel is told (schema airlock.notice.v1, docs/notice.v1.schema.json):
// an event about a confirmation (with its presentation, the one every approver surface
// shares), an agent proposal, or an MCP tool that left its pin. Every string that came from
// the model, a tool result, a client or an MCP server was passed through internal/display
// (package presentation): hidden characters are visible markers, values are cut at 200 runes,
// flags say what deserves a second look. Drivers still escape for their medium. The flat
// fields after Decide are the notice as it was before v1, kept for receivers that read them.
type Notice struct {
	// Schema is SchemaV1.
	Schema string `json:"schema"`
	// Kind is the event (EventRequested, EventReminder, EventEscalated, EventDecided,
	// EventExpired, EventMCPToolChanged, EventProposal).
	Kind string `json:"kind"`
	// DeliveryID is the idempotency key of this delivery (DeliveryID(subject, kind, channel)).
	DeliveryID string `json:"delivery_id"`
	// Channel is the name of the channel in the notify file.
	Channel string `json:"channel"`
	// At is when the event happened: issued, the reminder's due time, decided, expired, the
	// MCP change seen (UTC).
	At time.Time `json:"at"`
	// ConfirmationID is the confirmation (or, for a proposal, the proposal) it is about.
	ConfirmationID string `json:"confirmation_id,omitempty"`
	// Link opens the card on the signed-in approver page ("" when the notify file sets no base_url).
	Link string `json:"link,omitempty"`
	// Confirmation is the one presentation of the confirmation (confirmation events).
	Confirmation *presentation.Confirmation `json:"confirmation,omitempty"`
	// Requester is who asked for the turn (confirmation events; also inside Confirmation).
	Requester *presentation.Requester `json:"requester,omitempty"`
	// Decision is the decision (confirmation_decided and confirmation_expired).
	Decision *Decision `json:"decision,omitempty"`
	// Outcome is what became of the call: executed, failed, outcome_unknown, rejected (an
	// approved call), denied, expired; "" while unknown.
	Outcome string `json:"outcome,omitempty"`
	// MCPTool is the MCP tool that left its pin (mcp_tool_changed).
	MCPTool *MCPToolChange `json:"mcp_tool,omitempty"`
	// Decide, set on Slack notices of capabilities the notify file lets Slack decide, is the
	// value of the Approve and Deny buttons: the confirmation id and the argument digest this
	// message shows, so a click decides only those arguments. Not a token: the click is
	// checked by Slack's signature and the user map.
	Decide string `json:"decide,omitempty"`

	// Capability is "id@version" (a proposal's kind); Description the registry's description.
	Capability  string `json:"capability"`
	Description string `json:"description,omitempty"`
	// SideEffect is the registry's class (read, internal_write, external_write, …).
	SideEffect string `json:"side_effect,omitempty"`
	// AskedBy is the turn that asks: its workflow id ("turn/<conversation>/<seq>").
	AskedBy string `json:"asked_by"`
	// Arguments are the call's argument leaves, "path = value [flags]", at most 20.
	Arguments []string `json:"arguments"`
	// ArgumentsOmitted counts leaves beyond the 20 shown.
	ArgumentsOmitted int `json:"arguments_omitted,omitempty"`
	// Leaves is what leaves the machine (registry.Disclosure): destination and hosts.
	Leaves Leaves `json:"leaves"`
	// Provenance is where each argument value came from (provenance.Lines), one line each.
	Provenance []string `json:"provenance,omitempty"`
	// Flags are the display flags of any value shown (hidden characters, mixed-script hosts…).
	Flags []string `json:"flags,omitempty"`
	// ArgsDigest is the canonical digest of the arguments the approver decides on.
	ArgsDigest string    `json:"args_digest"`
	CreatedAt  time.Time `json:"created_at"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// Decision is a confirmation's decision as a notice states it.
type Decision struct {
	// Decision is approved, denied or expired.
	Decision string `json:"decision"`
	// By is who decided (and how they proved it); Reason a denial's reason (edited_by_approver
	// for an approver's edit).
	By     *presentation.Text `json:"by,omitempty"`
	Reason *presentation.Text `json:"reason,omitempty"`
	At     *time.Time         `json:"at,omitempty"`
}

// MCPToolChange is a pinned MCP tool whose live definition no longer matches its pin.
type MCPToolChange struct {
	// Server and Tool name it as the MCP servers file and the server do; Capability is the
	// registry capability bound to it ("id@version").
	Server     string `json:"server"`
	Tool       string `json:"tool"`
	Capability string `json:"capability"`
	// Reason is mcp_definition_changed or mcp_tool_missing; Detail says what changed.
	Reason string `json:"reason"`
	Detail string `json:"detail"`
	// Pinned is the digest the registry pinned; Live the live definition's ("" when missing).
	Pinned string `json:"pinned"`
	Live   string `json:"live,omitempty"`
}

// Leaves says where the call sends what, from the registry.Disclosure stored with the
// confirmation.
type Leaves struct {
	// Destination is "none", "host NAME", "server NAME" or "system NAME"; "unknown" when the
	// confirmation carries no disclosure.
	Destination string `json:"destination"`
	// Hosts are the hosts contacted as dialled, a written form that differs noted after it.
	Hosts []string `json:"hosts,omitempty"`
	// Fields are the declared fields that leave, "field = value".
	Fields []string `json:"fields,omitempty"`
}

// Channel delivers notices to one place (a webhook, a Slack channel, a mailbox). Send must be
// safe to call again with the same notice (a retry after a crash carries the same DeliveryID)
// and must return errors free of secrets (no URL holding a key, no password).
type Channel interface {
	Send(ctx context.Context, n Notice) error
}

// DeliveryID is the deterministic delivery id of one notice of kind about confirmation to
// channel: "nt-" and 24 hex digits of SHA-256(confirmation, kind, channel).
func DeliveryID(confirmation, kind, channel string) string {
	h := sha256.Sum256([]byte(confirmation + "\x00" + kind + "\x00" + channel))
	return "nt-" + hex.EncodeToString(h[:12])
}

// Build makes the Notice of kind about c for channel, with a link under baseURL ("" for none).
func Build(c store.Confirmation, kind, channel, baseURL string) Notice {
	n := Notice{Schema: SchemaV1, At: c.CreatedAt.UTC(),
		DeliveryID: DeliveryID(c.ID, kind, channel), Kind: EventOf(kind), Channel: channel, ConfirmationID: c.ID,
		Capability: display.Visible(display.OneLine(fmt.Sprintf("%s@%d", c.CapabilityID, c.Version))),
		AskedBy:    display.Show(display.OneLine(c.WorkflowID), 120).Line(),
		ArgsDigest: c.ArgsDigest, CreatedAt: c.CreatedAt.UTC(), ExpiresAt: c.ExpiresAt.UTC(),
	}
	flags := map[string]bool{}
	note := func(fs []display.Flag) {
		for _, f := range fs {
			flags[string(f)] = true
		}
	}
	if fields, err := display.Arguments(c.Arguments, valueLimit); err == nil {
		for i, f := range fields {
			if i >= maxFields {
				n.ArgumentsOmitted = len(fields) - maxFields
				break
			}
			n.Arguments = append(n.Arguments, display.OneLine(f.Line()))
			note(f.Flags)
		}
	} else {
		v := display.Show(string(c.Arguments), valueLimit)
		n.Arguments = []string{"(arguments not readable as JSON) " + display.OneLine(v.Line())}
		note(v.Flags)
	}
	n.Leaves = Leaves{Destination: "unknown"}
	var d registry.Disclosure
	if len(c.Disclosure) > 0 && json.Unmarshal(c.Disclosure, &d) == nil {
		n.Description = display.Show(display.OneLine(d.Description), valueLimit).Short
		// Registry words too go through display: a registry layer or an MCP server's tool
		// list is read from outside, and OneLine alone keeps control characters.
		n.SideEffect = display.Visible(display.OneLine(string(d.SideEffect)))
		n.Leaves.Destination = display.Visible(display.OneLine(string(d.Destination.Kind)))
		if d.Destination.Name != "" {
			n.Leaves.Destination += " " + display.OneLine(display.Line(d.Destination.Name))
		}
		for _, h := range d.Hosts {
			line := display.OneLine(display.Line(h.Host))
			if h.Written != "" {
				line += " (written " + display.OneLine(display.Show(h.Written, 120).Line()) + ")"
			}
			if h.Error != "" {
				line = "unknown host: " + display.OneLine(display.Show(h.Error, 120).Short)
			}
			n.Leaves.Hosts = append(n.Leaves.Hosts, line)
		}
		for _, l := range d.Leaving {
			v := display.Show(leafText(l.Value), valueLimit)
			note(v.Flags)
			n.Leaves.Fields = append(n.Leaves.Fields, display.OneLine(display.Line(l.Field)+" = "+v.Line()))
		}
	}
	for _, l := range provenance.Lines(c.Provenance) {
		line := l.Label
		if l.Untrusted {
			line = "⚠ " + line // first, as on the page and in the CLI: never lost to a cut
		}
		if l.Path != "" {
			line = l.Path + ": " + line
		}
		n.Provenance = append(n.Provenance, display.OneLine(display.Show(line, valueLimit).Line()))
	}
	for f := range flags {
		n.Flags = append(n.Flags, f)
	}
	sort.Strings(n.Flags)
	if baseURL != "" {
		n.Link = strings.TrimRight(baseURL, "/") + "/turn?id=" + url.QueryEscape(c.WorkflowID) + "#" + url.PathEscape(c.ID)
	}
	in := present.Input(c)
	in.Limit = valueLimit
	n.Present(presentation.Build(in))
	return n
}

// Present sets n's confirmation to p, and the requester, decision and outcome it states.
func (n *Notice) Present(p presentation.Confirmation) {
	p = p.Brief() // a channel is not signed in: values only to their limit (found by an attack helper)
	n.Confirmation = &p
	rq := p.Requester
	n.Requester = &rq
	switch p.Status.State {
	case presentation.StateApproved, presentation.StateDenied, presentation.StateExpired:
		n.Decision = &Decision{Decision: p.Status.State, By: p.Status.DecidedBy, Reason: p.Status.Reason, At: p.Status.DecidedAt}
		n.Outcome = p.Status.Outcome
		if p.Status.DecidedAt != nil && (n.Kind == EventDecided || n.Kind == EventExpired) {
			n.At = p.Status.DecidedAt.UTC()
		}
	default:
		n.Decision, n.Outcome = nil, ""
	}
}

// leafText is a JSON value as shown: a string's text, any other value's JSON.
func leafText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// Title is a one-line summary of n for subjects and fallbacks, made of trusted parts only
// (event, capability id, outcome words).
func (n Notice) Title() string {
	switch n.Kind {
	case EventReminder:
		return "Reminder: approval still waiting: " + n.Capability
	case EventEscalated:
		return "Escalation: approval undecided: " + n.Capability
	case EventProposal:
		return "Agent proposal waiting: " + n.Capability
	case EventDecided:
		if n.Decision != nil && n.Decision.Decision == presentation.StateDenied {
			return "Denied: " + n.Capability
		}
		switch n.Outcome {
		case "executed":
			return "Approved and ran: " + n.Capability
		case "failed":
			return "Approved, and it failed: " + n.Capability
		case "":
			return "Approved: " + n.Capability
		}
		return "Approved (" + display.Visible(n.Outcome) + "): " + n.Capability
	case EventExpired:
		return "Expired undecided: " + n.Capability
	case EventMCPToolChanged:
		return "MCP tool changed upstream, withdrawn until reviewed: " + n.Capability
	default:
		return "Approval waiting: " + n.Capability
	}
}

// Section is one titled block of a notice's human text (Slack, e-mail).
type Section struct {
	Title string
	Lines []string
}

// Sections is n's human text, the same for Slack and e-mail: for a confirmation, its
// presentation's labelled lines (presentation.Confirmation.Lines, at most 20 arguments) in
// blocks; for an MCP change, what changed and what to run; for a proposal, its content.
func (n Notice) Sections() []Section {
	if m := n.MCPTool; m != nil {
		return []Section{{"What changed", []string{"server: " + m.Server, "tool: " + m.Tool, "capability: " + m.Capability,
			"why: " + m.Reason, m.Detail, "pinned: " + m.Pinned, "live: " + orNone(m.Live)}},
			{"What to do", []string{"The tool is neither offered nor called until an operator reviews the change and imports it again (airlock mcp import)."}}}
	}
	if c := n.Confirmation; c != nil {
		var what, leaves, args, from []string
		for _, l := range c.Lines(maxFields) {
			line := l.Label + ": " + l.Text
			switch l.Label {
			case presentation.LabelArguments:
				args = append(args, l.Text)
			case presentation.LabelCameFrom:
				from = append(from, l.Text)
			case presentation.LabelDoes, presentation.LabelEffect, presentation.LabelGoesTo, presentation.LabelHost,
				presentation.LabelSends, presentation.LabelLeaves:
				leaves = append(leaves, line)
			default:
				what = append(what, line)
			}
		}
		what = append(what, "confirmation: "+c.ID)
		out := []Section{{"What", what}, {"Arguments", args}, {"What leaves the machine", leaves}}
		if len(from) > 0 {
			out = append(out, Section{"Where the values came from", from})
		}
		if len(c.Flags) > 0 {
			out = append(out, Section{"Look twice", []string{strings.Join(c.Flags, ", ")}})
		}
		return out
	}
	what := []string{"capability: " + n.Capability, "asked by: " + n.AskedBy, "id: " + n.ConfirmationID}
	args := n.Arguments
	if n.ArgumentsOmitted > 0 {
		args = append(append([]string{}, args...), fmt.Sprintf("… and %d more on the card", n.ArgumentsOmitted))
	}
	out := []Section{{"What", what}, {"Arguments", args}, {"What leaves the machine", append([]string{"destination: " + n.Leaves.Destination}, n.Leaves.Fields...)}}
	if len(n.Flags) > 0 {
		out = append(out, Section{"Look twice", []string{strings.Join(n.Flags, ", ")}})
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none: the tool is gone)"
	}
	return s
}

func sortStrings(s []string) { sort.Strings(s) }

// BuildProposal makes the Notice of agent proposal p for channel: its kind, the turn that made
// it, its content's leaves (model-written: made visible and bounded like arguments) and a link
// to the proposals page. It never carries a decision or a receipt.
func BuildProposal(p store.ProposalRow, channel, baseURL string) Notice {
	n := Notice{Schema: SchemaV1, At: p.CreatedAt.UTC(), DeliveryID: DeliveryID(p.ID, KindProposal, channel), Kind: EventProposal, Channel: channel, ConfirmationID: p.ID,
		Capability: display.OneLine(display.Line(p.Kind)), AskedBy: display.Show(display.OneLine(p.WorkflowID), 120).Line(),
		CreatedAt: p.CreatedAt.UTC(), Leaves: Leaves{Destination: "none (a proposal changes nothing until an approver accepts it)"}}
	flags := map[string]bool{}
	if fields, err := display.Arguments(p.Payload, valueLimit); err == nil {
		for i, f := range fields {
			if i >= maxFields {
				n.ArgumentsOmitted = len(fields) - maxFields
				break
			}
			n.Arguments = append(n.Arguments, display.OneLine(f.Line()))
			for _, fl := range f.Flags {
				flags[string(fl)] = true
			}
		}
	}
	for f := range flags {
		n.Flags = append(n.Flags, f)
	}
	sort.Strings(n.Flags)
	if baseURL != "" {
		n.Link = strings.TrimRight(baseURL, "/") + "/proposals#" + url.PathEscape(p.ID)
	}
	return n
}

// BuildMCP makes the notice of an MCP tool that left its pin, for channel: subject is the
// change's key (one per tool and live digest), at when the bridge saw it. Names and the detail
// come from an MCP server and the servers file: shown through display.
func BuildMCP(ch MCPToolChange, subject, channel string, at time.Time) Notice {
	w := func(s string) string { return display.Show(display.OneLine(s), valueLimit).Line() }
	m := MCPToolChange{Server: w(ch.Server), Tool: w(ch.Tool), Capability: w(ch.Capability), Reason: w(ch.Reason),
		Detail: display.Show(display.OneLine(ch.Detail), 2*valueLimit).Line(), Pinned: w(ch.Pinned), Live: w(ch.Live)}
	return Notice{Schema: SchemaV1, Kind: EventMCPToolChanged, DeliveryID: DeliveryID(subject, KindMCPToolChanged, channel),
		Channel: channel, At: at.UTC(), MCPTool: &m, Capability: m.Capability, Arguments: []string{}, Leaves: Leaves{Destination: "none"}}
}
