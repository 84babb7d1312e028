package inference

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/airlock-dev/airlock/internal/recording"
)

// Replay is a Provider that serves a recorded real model session (a recording.Session; the
// AgentDojo and tau-bench adapters build them) round by round: round r gets the recording's
// r-th assistant message after the user's task (recording.Session.Rounds), synthesized into an
// OpenAI chat.completion body. The request's context is not compared with the recording; a
// turn that diverges (a call rejected, denied or expired) simply stops using the recorded
// future.
//
// The body carries exactly what was recorded:
//   - content is the recorded text (null when empty), including any Llama-style
//     `<function=name>{…}</function>` text, which is never turned into tool_calls;
//   - tool_calls are the recorded structured calls, every one of them, with their recorded
//     ids: a call recorded with id "" is served with "id":"", one recorded without an id is
//     served without an id key, and Airlock's parser assigns such calls their id
//     (parse.AssignedCallID). Calls the benchmark harness read out of the text
//     (recording.Call.Text) are not calls the model emitted: they are not served, so the text
//     reaches the strict parser as text and is classified, never executed;
//   - arguments is the recorded args value's bytes as a JSON string: decoding the string gives
//     the file's bytes exactly (including the file's indentation).
//
// A recording one turn cannot serve faithfully (a second user message, an assistant message
// before the user's task) is refused with an error wrapping recording.ErrUnsupported from
// round 1 on, never served in part.
//
// Sessions are loaded once and cached; Replay is safe for concurrent use.
type Replay struct {
	load func(session string) (*recording.Session, error)

	mu       sync.Mutex
	sessions map[string][]recording.Round
	models   map[string]string
}

var _ Provider = (*Replay)(nil)

// NewReplay returns a replay provider that loads the recording of a session with load (for
// example agentdojo.Recorded(agentdojo.SessionLoader(corpusDir))).
func NewReplay(load func(session string) (*recording.Session, error)) *Replay {
	return &Replay{load: load, sessions: map[string][]recording.Round{}, models: map[string]string{}}
}

// Complete serves the recorded assistant message for req.Round of the recording named by
// req.Session. Errors: ErrInvalidRequest for an empty session or a round below 1,
// ErrSessionExhausted when the recording has no assistant message for the round, an error
// wrapping recording.ErrUnsupported for a recording one turn cannot serve, and the loader's
// error (wrapped) when the recording cannot be loaded.
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
	rounds, model, err := r.session(req.Session)
	if err != nil {
		return Response{}, err
	}
	if req.Round > len(rounds) {
		return Response{}, fmt.Errorf("%w: session %q has %d assistant messages, round %d", ErrSessionExhausted, req.Session, len(rounds), req.Round)
	}
	body := ReplayBody(model, rounds[req.Round-1])
	return Response{Format: FormatOpenAI, Raw: body}, nil
}

func (r *Replay) session(name string) ([]recording.Round, string, error) {
	r.mu.Lock()
	rounds, ok := r.sessions[name]
	model := r.models[name]
	r.mu.Unlock()
	if ok {
		return rounds, model, nil
	}
	s, err := r.load(name)
	if err != nil {
		return nil, "", fmt.Errorf("inference: replay: load session %q: %w", name, err)
	}
	if s == nil {
		return nil, "", fmt.Errorf("inference: replay: load session %q: no recording", name)
	}
	if s.Format != "" && s.Format != recording.FormatOpenAI {
		return nil, "", fmt.Errorf("inference: replay: session %q: %w: response format %q is not synthesized", name, recording.ErrUnsupported, s.Format)
	}
	rounds, err = s.Rounds()
	if err != nil {
		return nil, "", fmt.Errorf("inference: replay: session %q: %w", name, err)
	}
	model = s.Model
	r.mu.Lock()
	defer r.mu.Unlock()
	if cached, ok := r.sessions[name]; ok { // a concurrent call loaded it first
		return cached, r.models[name], nil
	}
	r.sessions[name], r.models[name] = rounds, model
	return rounds, model, nil
}

// ReplayBody synthesizes the OpenAI chat.completion body for one recorded round (see Replay):
//
//	{"id":"replay-<round>","object":"chat.completion","model":<model>,"choices":[{"index":0,
//	 "message":{"role":"assistant","content":<text|null>,"tool_calls":[…]},
//	 "finish_reason":"tool_calls"|"stop"}]}
//
// Each served call is {"id":<recorded id>,"type":"function","function":{…}}, with "id":"" for
// a call recorded with an empty id and no id key for one recorded without an id. The JSON is
// written by hand; only string values go through the encoder, so argument bytes survive
// exactly.
func ReplayBody(model string, round recording.Round) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"id":`)
	writeJSONString(&b, fmt.Sprintf("replay-%d", round.Number))
	b.WriteString(`,"object":"chat.completion","model":`)
	writeJSONString(&b, model)
	b.WriteString(`,"choices":[{"index":0,"message":{"role":"assistant","content":`)
	if round.Assistant.Content == "" {
		b.WriteString("null")
	} else {
		writeJSONString(&b, round.Assistant.Content)
	}
	calls := round.Structured()
	if len(calls) > 0 {
		b.WriteString(`,"tool_calls":[`)
		for i, c := range calls {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('{')
			if c.IDRecorded || c.ID != "" {
				b.WriteString(`"id":`)
				writeJSONString(&b, c.ID)
				b.WriteByte(',')
			}
			b.WriteString(`"type":"function","function":{"name":`)
			writeJSONString(&b, c.Name)
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
