package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/provenance"
	"github.com/airlock-dev/airlock/registry"
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
	b, _ := a.issueContext(ctx, conversation, args)
	return b
}

// issueContext reads the conversation's context once for a confirmation being issued: the
// provenance report of args (as provenanceOf) and the user's request, the newest user
// message of the conversation (the one the turn answers; "" when none was read).
func (a *Activities) issueContext(ctx context.Context, conversation string, args json.RawMessage) (json.RawMessage, string) {
	rep, userRequest, err := a.computeProvenance(ctx, conversation, args)
	if err != nil {
		rep = provenance.Report{Rules: provenance.Rules, Error: err.Error()}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		b, _ = json.Marshal(provenance.Report{Rules: provenance.Rules, Error: "encode: " + err.Error()})
	}
	return b, userRequest
}

// maxUserRequest bounds the user's request kept with a confirmation (bytes; surfaces cut it
// further for display).
const maxUserRequest = 4096

// UserRequestExcerpt is the user's request as a confirmation keeps it: at most 4096 bytes of
// valid UTF-8, "…" after a cut. The turn's pending query states it the same way as the store.
func UserRequestExcerpt(s string) string {
	if len(s) > maxUserRequest {
		return strings.ToValidUTF8(s[:maxUserRequest], "") + "…"
	}
	return s
}

func (a *Activities) computeProvenance(ctx context.Context, conversation string, args json.RawMessage) (provenance.Report, string, error) {
	if conversation == "" {
		return provenance.Report{}, "", fmt.Errorf("provenance: the turn names no conversation")
	}
	msgs, err := a.conversationMessages(ctx, conversation)
	if err != nil {
		return provenance.Report{}, "", err
	}
	userRequest := ""
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == inference.RoleUser {
			userRequest = msgs[i].Content
			break
		}
	}
	userRequest = UserRequestExcerpt(userRequest)
	rep, err := provenance.Compute(args, provenance.FromContext(msgs, a.catalogTools()))
	return rep, userRequest, err
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
	case string(OutcomeDenied), string(OutcomeExpired), AuditConfirmationRefused, AuditApprovalCounted:
		return true
	}
	return r.Approver != ""
}

// leavingFields are the top-level argument fields whose values leave the machine when c runs,
// as the registry declares them (Airlock.Destination.Fields: web.fetch's "url"); nil, every
// value, when the registry declares none, the stricter reading for the
// automatic-when-user-provided test.
func leavingFields(c *registry.Capability) []string {
	if d := c.Airlock.Destination; d != nil && len(d.Fields) > 0 {
		return d.Fields
	}
	return nil
}

// userProvided is the AdmitInput.UserProvided hook of a turn: it reads the conversation's
// stored context only when a capability's policy asks (the automatic-when-user-provided
// policy), so every other admission costs nothing. A context that cannot be read answers
// false: the call is confirmed.
func (a *Activities) userProvided(ctx context.Context, conversation string, args json.RawMessage) func([]string) bool {
	return func(fields []string) bool {
		if a.Store == nil {
			return false
		}
		rep, _, err := a.computeProvenance(ctx, conversation, args)
		return err == nil && rep.UserProvided(fields)
	}
}

// runsAsUserProvided is Execute's own check of an unconfirmed call of a capability that is
// not automatic as such: the policy this worker serves must say automatic-when-user-provided
// for the turn's principal and the capability must have no side effect (Authorize), and every
// leaving value must appear in the principal's messages in the context as stored now. The
// workflow's admission is not trusted for it (defense in depth: the registry or the context
// may have changed since).
func (a *Activities) runsAsUserProvided(ctx context.Context, reg *registry.Registry, c *registry.Capability, in ExecuteInput) bool {
	auth := reg.Authorize(c, in.Principal)
	if auth.Code != "" || !auth.IfUserProvided {
		return false
	}
	return a.userProvided(ctx, turnConversation("", in.WorkflowID), in.Arguments)(leavingFields(c))
}
