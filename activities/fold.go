package activities

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/parse"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
)

// Folded rounds (issue 12): the work a turn used to do in four local activities around each
// inference round (parse, record the assistant message, admit each call, record each automatic
// call's outcome) runs inside the two activities that already run, so a round costs one
// activity for inference and one per automatic call instead of six. Every turn folds its rounds
// (issue 20); the pieces are the code the workflow runs on its own where a round cannot fold
// (Parse, Admit, Record; AssistantMessage, FillVerdict, ApplyExecuted and ResultMessage are
// shared with the workflow), so what is stored and what the workflow keeps in its history agree.

// InferFold asks Infer to fold the steps around the round into itself. Nil: Infer only infers.
type InferFold struct {
	// Opening, on round 1 only: the user's message and, for a conversation's first turn, the
	// system prompt. Infer records them (under OpeningKey) before it asks the model, so the
	// user's message is kept even when inference fails for good.
	Opening      bool   `json:"opening,omitempty"`
	UserMessage  string `json:"user_message,omitempty"`
	SystemPrompt string `json:"system_prompt,omitempty"`
	OpeningKey   string `json:"opening_key,omitempty"`
	// AssistantKey is the context key the round's assistant message is recorded under.
	AssistantKey string `json:"assistant_key"`
	// FirstSeq is the proposal number the message's first call gets (the turn numbers calls in
	// order); RunID and Principal complete each call's AdmitInput.
	FirstSeq  int    `json:"first_seq"`
	RunID     string `json:"run_id"`
	Principal string `json:"principal,omitempty"`
	// Attestation and StartedAt, on round 1 only: the starter's proof of the request
	// (TurnRequest.Attestation) and the turn's start time as the server recorded it. Infer
	// verifies it before anything else (issue 21; verifyRequester).
	Attestation *clients.Attestation `json:"attestation,omitempty"`
	StartedAt   time.Time            `json:"started_at,omitzero"`
	// FirstRunID is the first run of the turn's chain (a workflow retry or reset keeps it):
	// the attestation may start that chain only.
	FirstRunID string `json:"first_run_id,omitempty"`
	// Terms, on round 1: the digest of the request's other terms (workflows.RequestTerms, from
	// the workflow's input), which the attestation signs too.
	Terms string `json:"terms,omitempty"`
}

// FoldedRound is what a folded Infer did besides inferring.
type FoldedRound struct {
	// Context, on round 1: the context the model was sent (the stored window and the opening).
	Context []inference.Message `json:"context,omitempty"`
	// Parsed is the strict parse of the response; ParseError, when set, says why the response
	// is not a provider response at all (the turn fails with it, as the Parse activity would).
	Parsed     parse.Result `json:"parsed"`
	ParseError string       `json:"parse_error,omitempty"`
	// AssistantRecorded: the round's assistant message (AssistantMessage(Parsed)) is stored.
	// False when the message holds agent-proposal calls: the turn's proposal hook may rewrite
	// them first, so the workflow records it itself.
	AssistantRecorded bool `json:"assistant_recorded,omitempty"`
	// Admissions are stages 1-3 of the message's calls, against the registry snapshot the
	// catalog came from, for the calls that are candidates. A deprecated admission is left
	// out: the workflow admits it again through Admit, which audits the warning.
	Admissions []PreAdmission `json:"admissions,omitempty"`
}

// PreAdmission is the admission of the call numbered Seq, computed during inference.
type PreAdmission struct {
	Seq       int       `json:"seq"`
	Admission Admission `json:"admission"`
}

// foldOpening, on round 1 of a folded turn, records the opening (the system prompt for a new
// conversation, and the user's message) and returns the context the model is sent. Infer
// calls it before the model call and foldAfter after it.
func (a *Activities) foldOpening(ctx context.Context, in InferInput) ([]inference.Message, error) {
	f := in.Fold
	stored, prompt, err := a.loadWindow(ctx, in.Conversation, in.ContextLimit, f.unrecorded(in))
	if err != nil {
		return nil, err
	}
	var opening []inference.Message
	if len(stored) == 0 && f.SystemPrompt != "" {
		opening = append(opening, inference.Message{Role: inference.RoleSystem, Content: f.SystemPrompt})
		prompt = true
	}
	opening = append(opening, inference.Message{Role: inference.RoleUser, Content: f.UserMessage})
	if err := a.Record(ctx, RecordInput{Conversation: in.Conversation, ContextKey: f.OpeningKey, Messages: opening}); err != nil {
		return nil, err
	}
	// What loadWindow would read now: the window slid by the opening, the prompt leading.
	return window(append(stored, opening...), in.ContextLimit, prompt), nil
}

// unrecorded reports the context keys of this turn that an attempt which never reached
// workflow history may have written: the assistant messages of this round and later ones, and
// the outcomes of proposals numbered FirstSeq and up. The round deletes them before it reads
// the context, so a round asked again after a crash (a regular Infer retried, a local workflow
// task run again) neither shows the model its own lost answer nor leaves it in the
// conversation for later turns.
func (f *InferFold) unrecorded(in InferInput) func(key string) bool {
	prefix := in.WorkflowID + "/"
	return func(key string) bool {
		rest, ok := strings.CutPrefix(key, prefix)
		if !ok {
			return false
		}
		var n, i int
		if _, err := fmt.Sscanf(rest, "r%d/assistant/%d", &n, &i); err == nil && rest == fmt.Sprintf("r%d/assistant/%d", n, i) {
			return n >= in.Round
		}
		if _, err := fmt.Sscanf(rest, "p%d/%d", &n, &i); err == nil && rest == fmt.Sprintf("p%d/%d", n, i) {
			return n >= f.FirstSeq
		}
		return false
	}
}

// window is what loadWindow returns once msgs are stored: the last limit of them, without
// leading tool results (their assistant message fell outside the window); with prompt, msgs[0]
// is the conversation's system prompt and keeps leading, in one of the limit places.
func window(msgs []inference.Message, limit int, prompt bool) []inference.Message {
	bounded := limit > 0
	var head []inference.Message
	if prompt && len(msgs) > 0 {
		head, msgs = msgs[:1], msgs[1:]
		limit = max(limit-1, 0)
	}
	if bounded && len(msgs) > limit {
		msgs = msgs[len(msgs)-limit:]
	}
	for len(msgs) > 0 && msgs[0].Role == inference.RoleTool {
		msgs = msgs[1:]
	}
	return append(append([]inference.Message{}, head...), msgs...)
}

// foldAfter parses the response, records the assistant message and admits the calls.
// Calls are admitted against reg, the snapshot the round's catalog came from.
func (a *Activities) foldAfter(ctx context.Context, in InferInput, out *InferOutput, reg *registry.Registry) error {
	f := in.Fold
	fr := out.Folded
	parsed, err := a.Parse(ctx, ParseInput{Response: out.Response, Catalog: out.Catalog, Round: in.Round, WorkflowID: in.WorkflowID})
	if err != nil {
		fr.ParseError = err.Error()
		return nil
	}
	fr.Parsed = parsed
	if err := a.auditIncomplete(ctx, in, parsed); err != nil {
		return err
	}
	if namesProposal(out.Catalog, parsed.Calls) {
		return nil // the proposal hook decides; the workflow records and admits
	}
	// Replace: an attempt of this round that died before its answer reached history may have
	// stored another answer under the key; the answer the workflow goes on with must be the
	// stored one (its tool results answer its call ids).
	if err := a.Record(ctx, RecordInput{Conversation: in.Conversation, ContextKey: f.AssistantKey, Replace: true,
		Messages: []inference.Message{AssistantMessage(parsed)}}); err != nil {
		return err
	}
	fr.AssistantRecorded = true
	if reg.Cedar() != nil {
		return nil // a Cedar policy reads the turn's call count: the workflow admits each call
	}
	for i, c := range parsed.Calls {
		if !c.Candidate() {
			continue
		}
		seq := f.FirstSeq + i
		ad := Admit(reg, AdmitInput{Call: c, Scope: in.Scope, Principal: f.Principal, Now: in.Now, WorkflowID: in.WorkflowID, RunID: f.RunID, Seq: seq,
			UserProvided: a.userProvided(ctx, in.Conversation, c.Arguments)})
		if ad.Warning != "" {
			continue
		}
		fr.Admissions = append(fr.Admissions, PreAdmission{Seq: seq, Admission: ad})
	}
	return nil
}

// Answerable reports whether a call can be echoed back to the model as a structured call with
// its own tool result. Calls without an id (text), calls of a message with a shared id and
// calls whose name is outside the grammar are answered with an Airlock note instead: providers
// reject a context with two tool calls under one id or a tool name they could not have
// offered, and every later request of the conversation would fail.
func Answerable(c parse.Call) bool {
	return c.CallID != "" && c.Reason != parse.ReasonDuplicateCallID && c.Reason != parse.ReasonInvalidName
}

// AssistantMessage is the context message of a parsed model message: its prose and its
// answerable calls (a call that is not a candidate is echoed with its raw arguments).
func AssistantMessage(parsed parse.Result) inference.Message {
	m := inference.Message{Role: inference.RoleAssistant, Content: parsed.Text, ProviderState: parsed.ProviderState}
	for _, c := range parsed.Calls {
		if !Answerable(c) {
			continue
		}
		args := string(c.Arguments)
		if !c.Candidate() {
			args = c.Raw
		}
		m.ToolCalls = append(m.ToolCalls, inference.ToolCall{ID: c.CallID, Name: c.Name, Arguments: args, ProviderState: c.ProviderState})
	}
	return m
}

// ResultMessage is the context message for a proposal's outcome: a tool message when the call
// has an id, else an Airlock note (tool-call-shaped text has no id to answer).
func ResultMessage(call parse.Call, env Envelope) inference.Message {
	if !Answerable(call) {
		// A system-role note carries only Airlock's own verdict: no model-controlled text (the
		// call's name, id or arguments, a parser detail quoting them) is ever system text.
		note := Envelope{Outcome: env.Outcome, Stage: env.Stage, Reason: env.Reason,
			Detail: fmt.Sprintf("call #%d of your previous message was not executed", call.Index+1)}
		return inference.Message{Role: inference.RoleSystem, Content: "airlock: " + note.String()}
	}
	return inference.Message{Role: inference.RoleTool, ToolCallID: call.CallID, Content: env.String()}
}

// FillVerdict writes an outcome (stage 6) into a proposal's audit record and envelope: the
// outcome, stage, reason and detail, the capability and version, and the approver.
func FillVerdict(audit *AuditRecord, env *Envelope, o Outcome, stage Stage, reason, detail, capabilityID string, version int, approver string) {
	audit.Kind, audit.Stage, audit.Reason, audit.Detail = string(o), stage, reason, detail
	audit.CapabilityID, audit.Version, audit.Approver = capabilityID, version, approver
	env.Outcome, env.Stage, env.Reason, env.Detail = o, stage, reason, detail
	env.Capability, env.Version = capabilityID, version
}

// ApplyExecuted writes what Execute returned into the envelope the model receives: the data as
// untrusted, with its source, retrieval time, error and attempts.
func ApplyExecuted(env *Envelope, out ExecuteOutput) {
	retrieved := out.RetrievedAt
	env.Trust = "untrusted"
	env.RetrievedAt = &retrieved
	env.SourceURL = out.Output.SourceURL
	env.Data = out.Output.Data
	env.Error = out.Output.Error
	env.Attempts = out.Attempts
}

// ExecuteRecordedInput is a local read-only call (automatic, or confirmed and approved) to run
// and record in one local activity: the
// Execute input and the proposal's verdict as it stands before execution (Audit and Envelope
// as the workflow built them; CapabilityID, Version, Approver complete them).
type ExecuteRecordedInput struct {
	Execute  ExecuteInput `json:"execute"`
	Audit    AuditRecord  `json:"audit"`
	Envelope Envelope     `json:"envelope"`
	Call     parse.Call   `json:"call"`
	Approver string       `json:"approver,omitempty"`
	// Decision is the approval of a confirmed call, recorded with its outcome (nil: automatic).
	Decision     *Decision `json:"decision,omitempty"`
	Conversation string    `json:"conversation"`
	ContextKey   string    `json:"context_key"`
}

// ExecuteRecorded runs stage 5 for a local read-only call and, when it returned, stage 6: its
// audit row, its approval (a confirmed call) and its context message, built exactly as the workflow builds them from the returned
// ExecuteOutput (FillVerdict, ApplyExecuted, ResultMessage). An Execute error is returned
// unrecorded: the workflow decides that outcome (failed or outcome_unknown) and records it.
func (a *Activities) ExecuteRecorded(ctx context.Context, in ExecuteRecordedInput) (ExecuteOutput, error) {
	var conf *store.Confirmation
	out, err := a.executeChecked(ctx, in.Execute, &conf)
	if err != nil {
		return out, err
	}
	audit, env := in.Audit, in.Envelope
	ApplyExecuted(&env, out)
	FillVerdict(&audit, &env, out.Outcome, StageExecute, out.Reason, out.Output.Error, in.Execute.CapabilityID, in.Execute.Version, in.Approver)
	// Replace: a round asked again after a crash (local infer mode) may carry another call under
	// this proposal's number; the tool message must answer the call history goes on with.
	if err := a.record(ctx, RecordInput{Audit: &audit, Decision: in.Decision, Conversation: in.Conversation, ContextKey: in.ContextKey, Replace: true,
		Messages: []inference.Message{ResultMessage(in.Call, env)}}, conf); err != nil {
		return out, err
	}
	return out, nil
}

// auditIncomplete writes the audit row of a model message the parser refused as a whole
// (parse.Result.Incomplete: a refusal, a provider error, an unread part, a stream fault, a
// truncated or abnormal end): its reason and detail, keyed by the turn's run and round so a
// retried round writes it once. Each call of such a message is audited parse_failed as
// always; this row also covers a refused message with no call, which left no trace before.
func (a *Activities) auditIncomplete(ctx context.Context, in InferInput, parsed parse.Result) error {
	if parsed.Incomplete == "" || a.Store == nil || in.WorkflowID == "" {
		return nil
	}
	_, err := a.Store.AppendAudit(ctx, store.AuditEvent{Key: fmt.Sprintf("%s/%s/r%d/%s", in.WorkflowID, in.Fold.RunID, in.Round, AuditMessageIncomplete),
		WorkflowID: in.WorkflowID, RunID: in.Fold.RunID, Outcome: AuditMessageIncomplete, Stage: string(StageParse),
		Reason: string(parsed.Incomplete), Detail: parsed.IncompleteDetail, At: a.now()})
	if err != nil {
		return fmt.Errorf("audit the refused message of round %d: %w", in.Round, err)
	}
	return nil
}
