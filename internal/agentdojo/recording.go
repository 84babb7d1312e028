package agentdojo

import (
	"fmt"
	"strings"

	"github.com/airlock-dev/airlock/internal/recording"
)

// Recording adapts the trace to Airlock's neutral recorded-session model (internal/recording):
// every message in order, each tool message keyed to the call it answers (by tool_call_id when
// every call of its assistant message has an id, by position otherwise, as LoadTrace checked),
// recorded tool errors, and the pipeline as the model.
//
// Calls keep their recorded ids; a call recorded with id "" keeps IDRecorded (served as
// "id":""), one recorded with id null or none is served without an id key. AgentDojo's
// prompt-format pipelines (the Llama-3.3 "local" runs) record their own reading of the model's
// text as calls with id null: a null-id call whose message text holds the harness's call form
// "<function=NAME" is marked recording.Call.Text and is never served as a structured call, so
// the text reaches the strict parser as text. Errors: ErrMalformedTrace when a tool message
// matches no call (a hand-built trace that LoadTrace would refuse).
func (t *Trace) Recording() (*recording.Session, error) {
	s := &recording.Session{Model: t.Pipeline, Format: recording.FormatOpenAI, Messages: make([]recording.Message, len(t.Messages))}
	answered := make(map[int]int) // tool message index -> call index
	for i, m := range t.Messages {
		rm := recording.Message{Role: recording.Role(m.Role), Content: m.Content, CallIndex: -1}
		switch m.Role {
		case RoleAssistant:
			for _, c := range m.ToolCalls {
				text := !c.IDRecorded && strings.Contains(m.Content, "<function="+c.Function)
				rm.Calls = append(rm.Calls, recording.Call{Name: c.Function, Args: c.Args, ID: c.ID, IDRecorded: c.IDRecorded, Text: text})
			}
			results, err := matchResults(t.Messages, i)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrMalformedTrace, err)
			}
			for _, r := range results {
				answered[r.msg] = r.CallIndex
			}
		case RoleTool:
			k, ok := answered[i]
			if !ok {
				return nil, fmt.Errorf("%w: tool message %d answers no recorded call", ErrMalformedTrace, i)
			}
			rm.CallIndex, rm.Error = k, deref(m.Error)
		}
		s.Messages[i] = rm
	}
	return s, nil
}

// Recorded turns a trace loader (SessionLoader, taubench.SessionLoader) into a loader of
// neutral recorded sessions for the replay provider and the replay capabilities: it loads the
// trace and adapts it with Trace.Recording, naming the session.
func Recorded(load func(session string) (*Trace, error)) func(session string) (*recording.Session, error) {
	return func(session string) (*recording.Session, error) {
		t, err := load(session)
		if err != nil {
			return nil, err
		}
		if t == nil {
			return nil, fmt.Errorf("agentdojo: session %q: no trace", session)
		}
		s, err := t.Recording()
		if err != nil {
			return nil, fmt.Errorf("agentdojo: session %q: %w", session, err)
		}
		s.Name = session
		return s, nil
	}
}

// RecordingTools adapts AgentDojo (and tau-bench) tool definitions to recording.Tool, their
// parameters made standard JSON Schema by StandardSchema. Errors name the tool whose parameters
// cannot be converted.
func RecordingTools(tools []Tool) ([]recording.Tool, error) {
	out := make([]recording.Tool, 0, len(tools))
	for _, t := range tools {
		std, err := StandardSchema(t.Parameters)
		if err != nil {
			return nil, fmt.Errorf("agentdojo: tool %s: %w", t.Name, err)
		}
		out = append(out, recording.Tool{Name: t.Name, Parameters: std})
	}
	return out, nil
}
