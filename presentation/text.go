package presentation

import (
	"fmt"
	"time"
)

// Line is one labelled line of a confirmation's text form.
type Line struct {
	// Label is a fixed word ("goes to", "came from"); Text is already shown through display.
	Label string
	Text  string
}

// Text labels, in the order Lines gives them.
const (
	LabelTurn       = "turn"
	LabelCapability = "capability"
	LabelAsked      = "user asked"
	LabelRequester  = "requester"
	LabelDeciders   = "deciders"
	LabelPasskey    = "passkey"
	LabelDoes       = "does"
	LabelEffect     = "effect"
	LabelGoesTo     = "goes to"
	LabelHost       = "host"
	LabelSends      = "sends"
	LabelLeaves     = "leaves"
	LabelArguments  = "arguments"
	LabelCameFrom   = "came from"
	LabelExpires    = "expires at"
	LabelStatus     = "status"
)

// ExpiryTimeFormat is how text surfaces write the expiry (in UTC).
const ExpiryTimeFormat = time.RFC3339

// Expiry is the expiry as every text surface prints it (UTC, RFC 3339).
func (c Confirmation) Expiry() string { return c.ExpiresAt.UTC().Format(ExpiryTimeFormat) }

// Lines is c as labelled lines, the order and words every text surface (the CLI, Slack,
// e-mail) prints: turn, capability, the user's request, requester, deciders and quorum,
// passkey, what it does, its effect, where it goes, hosts, what it sends, the arguments,
// where each value came from, the expiry and the status. Repeated labels (host, sends,
// arguments, came from) are one line each value. Arguments beyond maxArgs (0: all) are
// counted in one last "arguments" line.
func (c Confirmation) Lines(maxArgs int) []Line {
	var out []Line
	add := func(label, text string) { out = append(out, Line{label, text}) }
	add(LabelTurn, fmt.Sprintf("%s (proposal #%d, call %s)", c.TurnID.Line(), c.Seq, c.CallID.Line()))
	add(LabelCapability, fmt.Sprintf("%s (tool %s)", c.Ref(), c.Tool.Line()))
	if c.UserRequest.Text != "" {
		add(LabelAsked, c.UserRequest.Line())
	} else {
		add(LabelAsked, "(not known)")
	}
	add(LabelRequester, c.Requester.Line())
	add(LabelDeciders, c.Quorum.Deciders()+"; "+c.Quorum.Line())
	if c.PasskeyRequired {
		add(LabelPasskey, "required: decide it on the approver page with your passkey")
	}
	if c.Destination.Guessed {
		for _, s := range c.Destination.Sends {
			add(LabelLeaves, fmt.Sprintf("%-9s %s (guessed from the argument's name)", s.Kind, s.Line()))
		}
	} else {
		add(LabelDoes, c.Description.Line())
		add(LabelEffect, "side effect "+c.SideEffect+", network "+c.Network)
		add(LabelGoesTo, c.Destination.Line)
		for _, h := range c.Destination.Hosts {
			add(LabelHost, h.Line())
		}
		if len(c.Destination.Sends) == 0 {
			add(LabelSends, "none of the arguments")
		}
		for _, s := range c.Destination.Sends {
			add(LabelSends, s.Line())
		}
	}
	for i, a := range c.Arguments {
		if maxArgs > 0 && i >= maxArgs {
			add(LabelArguments, fmt.Sprintf("(%d more on the card)", len(c.Arguments)-maxArgs))
			break
		}
		add(LabelArguments, a.Line())
	}
	for _, o := range c.Provenance {
		add(LabelCameFrom, o.Line())
	}
	add(LabelExpires, c.Expiry())
	add(LabelStatus, c.StatusLine())
	return out
}
