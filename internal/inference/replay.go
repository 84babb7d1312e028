package inference

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/airlock-dev/airlock/internal/agentdojo"
)

// Replay is a Provider that serves a recorded real model session (an AgentDojo trace) round by
// round: round r gets the trace's r-th assistant message, synthesized into an OpenAI
// chat.completion body. The request's context is not compared with the recording; a turn that
// diverges (a call rejected, denied or expired) simply stops using the recorded future.
//
// The body carries exactly what was recorded:
//   - content is the recorded text (null when empty), including any Llama-style
//     `<function=name>{…}</function>` text, which is never turned into tool_calls;
//   - tool_calls are the recorded structured calls with their recorded ids. Calls recorded
//     without an id (prompt-format pipelines such as Llama-3.3) are AgentDojo's own reading of
//     the model's text, not calls the model emitted: they are not served, so the text reaches
//     the strict parser as text and is classified, never executed;
//   - arguments is the recorded args value's bytes as a JSON string: decoding the string gives
//     the file's bytes exactly (including the file's indentation).
//
// Traces are loaded once per session and cached; Replay is safe for concurrent use.
type Replay struct {
	load func(session string) (*agentdojo.Trace, error)

	mu       sync.Mutex
	sessions map[string][]agentdojo.Step
	models   map[string]string
}

var _ Provider = (*Replay)(nil)

// NewReplay returns a replay provider that loads the trace of a session with load (for
// example agentdojo.SessionLoader(corpusDir)).
func NewReplay(load func(session string) (*agentdojo.Trace, error)) *Replay {
	return &Replay{load: load, sessions: map[string][]agentdojo.Step{}, models: map[string]string{}}
}

// Complete serves the recorded assistant message for req.Round of the trace named by
// req.Session. Errors: ErrInvalidRequest for an empty session or a round below 1,
// ErrSessionExhausted when the trace has no assistant message for the round, and the loader's
// error (wrapped) when the trace cannot be loaded.
func (r *Replay) Complete(ctx context.Context, req Request) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, fmt.Errorf("inference: replay: %w", err)
	}
	if req.Session == "" {
		return Response{}, fmt.Errorf("%w: replay needs a session", ErrInvalidRequest)
	}
	if req.Round < 1 {
		return Response{}, fmt.Errorf("%w: round %d", ErrInvalidRequest, req.Round)
	}
	steps, model, err := r.session(req.Session)
	if err != nil {
		return Response{}, err
	}
	if req.Round > len(steps) {
		return Response{}, fmt.Errorf("%w: session %q has %d assistant messages, round %d", ErrSessionExhausted, req.Session, len(steps), req.Round)
	}
	body := ReplayBody(model, steps[req.Round-1])
	return Response{Format: FormatOpenAI, Raw: body}, nil
}

func (r *Replay) session(name string) ([]agentdojo.Step, string, error) {
	r.mu.Lock()
	steps, ok := r.sessions[name]
	model := r.models[name]
	r.mu.Unlock()
	if ok {
		return steps, model, nil
	}
	t, err := r.load(name)
	if err != nil {
		return nil, "", fmt.Errorf("inference: replay: load session %q: %w", name, err)
	}
	if t == nil {
		return nil, "", fmt.Errorf("inference: replay: load session %q: no trace", name)
	}
	steps, model = t.Steps(), t.Pipeline
	r.mu.Lock()
	defer r.mu.Unlock()
	if cached, ok := r.sessions[name]; ok { // a concurrent call loaded it first
		return cached, r.models[name], nil
	}
	r.sessions[name], r.models[name] = steps, model
	return steps, model, nil
}

// ReplayBody synthesizes the OpenAI chat.completion body for one recorded step (see Replay):
//
//	{"id":"replay-<round>","object":"chat.completion","model":<model>,"choices":[{"index":0,
//	 "message":{"role":"assistant","content":<text|null>,"tool_calls":[…]},
//	 "finish_reason":"tool_calls"|"stop"}]}
//
// The JSON is written by hand; only string values go through the encoder, so argument bytes
// survive exactly.
func ReplayBody(model string, step agentdojo.Step) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"id":`)
	writeJSONString(&b, fmt.Sprintf("replay-%d", step.Round))
	b.WriteString(`,"object":"chat.completion","model":`)
	writeJSONString(&b, model)
	b.WriteString(`,"choices":[{"index":0,"message":{"role":"assistant","content":`)
	if step.Assistant.Content == "" {
		b.WriteString("null")
	} else {
		writeJSONString(&b, step.Assistant.Content)
	}
	calls := step.Assistant.ToolCalls
	if len(calls) > 0 && calls[0].ID == "" {
		calls = nil // text calls parsed by the harness, not structured calls from the model
	}
	if len(calls) > 0 {
		b.WriteString(`,"tool_calls":[`)
		for i, c := range calls {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"id":`)
			writeJSONString(&b, step.CallID(i))
			b.WriteString(`,"type":"function","function":{"name":`)
			writeJSONString(&b, c.Function)
			b.WriteString(`,"arguments":`)
			writeJSONString(&b, string(c.Args))
			b.WriteString(`}}`)
		}
		b.WriteByte(']')
	}
	b.WriteString(`},"finish_reason":`)
	if len(calls) > 0 {
		b.WriteString(`"tool_calls"`)
	} else {
		b.WriteString(`"stop"`)
	}
	b.WriteString(`}]}`)
	return json.RawMessage(b.Bytes())
}
