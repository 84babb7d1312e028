package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/provenance"
)

// provenanceWindow bounds how much of a conversation provenance reads: the principal's own
// messages of the conversation and what the model was shown, newest last (issue 24). 1,000
// entries is five times the default context window, so nothing the model saw is missed.
const provenanceWindow = 1000

// turnConversation is the conversation of a turn: the one the workflow names, else the one
// its id holds (TurnWorkflowID: "turn/<conversation>/<seq>"; conversations may contain "/").
func turnConversation(named, workflowID string) string {
	if named != "" {
		return named
	}
	rest, ok := strings.CutPrefix(workflowID, "turn/")
	if i := strings.LastIndexByte(rest, '/'); ok && i > 0 {
		return rest[:i]
	}
	return ""
}

// provenanceOf computes where each value of args came from, in trusted code, from the
// conversation's context as Airlock stored it and the registry's catalog (never from anything
// the model says). What it cannot read is said in the report (Report.Error), never skipped:
// the confirmation is issued either way, and surfaces show "provenance unavailable".
func (a *Activities) provenanceOf(ctx context.Context, conversation string, args json.RawMessage) json.RawMessage {
	rep, err := a.computeProvenance(ctx, conversation, args)
	if err != nil {
		rep = provenance.Report{Rules: provenance.Rules, Error: err.Error()}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		b, _ = json.Marshal(provenance.Report{Rules: provenance.Rules, Error: "encode: " + err.Error()})
	}
	return b
}

func (a *Activities) computeProvenance(ctx context.Context, conversation string, args json.RawMessage) (provenance.Report, error) {
	if conversation == "" {
		return provenance.Report{}, fmt.Errorf("provenance: the turn names no conversation")
	}
	msgs, err := a.conversationMessages(ctx, conversation)
	if err != nil {
		return provenance.Report{}, err
	}
	return provenance.Compute(args, provenance.FromContext(msgs, a.catalogTools()))
}

// conversationMessages is the stored context of a conversation, oldest first, at most
// provenanceWindow entries. Errors: the store, or an entry that is not a message.
func (a *Activities) conversationMessages(ctx context.Context, conversation string) ([]inference.Message, error) {
	entries, err := a.Store.LoadContext(ctx, conversation, provenanceWindow)
	if err != nil {
		return nil, fmt.Errorf("provenance: %w", err)
	}
	msgs := make([]inference.Message, 0, len(entries))
	for _, e := range entries {
		var m inference.Message
		if err := json.Unmarshal(e.Payload, &m); err != nil {
			return nil, fmt.Errorf("provenance: stored context entry %d is not a message: %w", e.ID, err)
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// catalogTools are the tool names and descriptions of every model-visible capability: what
// the model may have been offered (registry-written text, so Airlock's own).
func (a *Activities) catalogTools() []inference.Tool {
	var out []inference.Tool
	for _, c := range a.reg().Capabilities() {
		if c.Airlock.ModelVisible {
			out = append(out, inference.Tool{Name: c.Airlock.ToolName, Description: c.Airlock.Description})
		}
	}
	return out
}

// heldForAHuman reports whether an outcome row is about a call that was put to an approver
// (approved, denied, expired, or a refused decision), the rows that carry its provenance.
// Automatic calls are not looked up: they cost no extra store read.
func heldForAHuman(r *AuditRecord) bool {
	switch r.Kind {
	case string(OutcomeDenied), string(OutcomeExpired), AuditConfirmationRefused:
		return true
	}
	return r.Approver != ""
}
