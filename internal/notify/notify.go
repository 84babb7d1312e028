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
	"github.com/airlock-dev/airlock/internal/provenance"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
)

// Notice kinds.
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
)

// valueLimit bounds each model-written value a notice shows (runes of visible text); the card
// behind the link shows it all.
const valueLimit = 200

// maxFields bounds the argument lines of one notice.
const maxFields = 20

// Notice is what one channel is told about one confirmation. Every string that came from the
// model, a tool result or a client (arguments, the turn id) was passed through
// internal/display: hidden characters are visible markers, values are cut at 200 runes with a
// note, and flags say what deserves a second look. Drivers still escape for their medium.
type Notice struct {
	// DeliveryID is the idempotency key of this delivery (DeliveryID(confirmation, kind, channel)).
	DeliveryID string `json:"delivery_id"`
	// Kind is pending, reminder or escalation.
	Kind string `json:"kind"`
	// Channel is the name of the channel in the notify file.
	Channel        string `json:"channel"`
	ConfirmationID string `json:"confirmation_id"`
	// Capability is "id@version"; Description the registry's description of it.
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
	// Link opens the card on the signed-in approver page ("" when the notify file sets no base_url).
	Link string `json:"link,omitempty"`
	// Decide, set on Slack notices of capabilities the notify file lets Slack decide, is the
	// value of the Approve and Deny buttons: the confirmation id and the argument digest this
	// message shows, so a click decides only those arguments. Not a token: the click is
	// checked by Slack's signature and the user map.
	Decide string `json:"decide,omitempty"`
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
	n := Notice{
		DeliveryID: DeliveryID(c.ID, kind, channel), Kind: kind, Channel: channel, ConfirmationID: c.ID,
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
	return n
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
// (kind, capability id) and the confirmation id.
func (n Notice) Title() string {
	switch n.Kind {
	case KindReminder:
		return "Reminder: approval still waiting: " + n.Capability
	case KindEscalation:
		return "Escalation: approval undecided: " + n.Capability
	case KindProposal:
		return "Agent proposal waiting: " + n.Capability
	default:
		return "Approval waiting: " + n.Capability
	}
}

func sortStrings(s []string) { sort.Strings(s) }

// BuildProposal makes the Notice of agent proposal p for channel: its kind, the turn that made
// it, its content's leaves (model-written: made visible and bounded like arguments) and a link
// to the proposals page. It never carries a decision or a receipt.
func BuildProposal(p store.ProposalRow, channel, baseURL string) Notice {
	n := Notice{DeliveryID: DeliveryID(p.ID, KindProposal, channel), Kind: KindProposal, Channel: channel, ConfirmationID: p.ID,
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
