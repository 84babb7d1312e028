package recording

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/airlock-dev/airlock/internal/parse"
)

// Role is a recorded message's role.
type Role string

// Message roles.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// FormatOpenAI is the response format the replay provider synthesizes for a session whose
// Format is empty: an OpenAI chat.completion body.
const FormatOpenAI = string(parse.FormatOpenAI)

// ErrMalformed reports a Session whose messages are inconsistent (a tool message that answers
// no call, a call index out of range, an unknown role).
var ErrMalformed = errors.New("recording: malformed session")

// ErrUnsupported reports a recording one Airlock turn cannot serve faithfully (see the package
// documentation, Rounds). The error's text names the reason; it is refused, never served in
// part.
var ErrUnsupported = errors.New("recording: unsupported recording")

// Session is one recorded model session, in recorded order.
type Session struct {
	// Name is the session name the recording was loaded under ("" when not known).
	Name string
	// Model is the recorded model (or pipeline) name, served as the response's model.
	Model string
	// Format is the response format the replay provider serves ("" means FormatOpenAI, the
	// only one synthesized today).
	Format string
	// Messages are the recorded messages in order.
	Messages []Message
}

// Message is one recorded message.
type Message struct {
	// Role is system, user, assistant or tool.
	Role Role
	// Content is the message text ("" when none was recorded).
	Content string
	// Calls are an assistant message's recorded calls, in emitted order.
	Calls []Call
	// CallIndex is, for a tool message, the index in the preceding assistant message's Calls of
	// the call it answers (matched by the adapter, by id or position).
	CallIndex int
	// Error is, for a tool message, the recorded tool error ("" when none).
	Error string
}

// Call is one recorded tool call.
type Call struct {
	// Name is the called tool's name, as recorded.
	Name string
	// Args is the recorded argument value's bytes, exactly as recorded.
	Args json.RawMessage
	// ID is the recorded call id ("" when recorded empty or not at all; see IDRecorded).
	ID string
	// IDRecorded reports that the recording has an id key for the call with a string value
	// (possibly ""); false means no id was recorded (key absent or null). The replay serves
	// the call with "id":"" or without an id key accordingly.
	IDRecorded bool
	// Text reports a call the benchmark harness read out of the message text (a prompt-format
	// pipeline), not a structured call the model emitted: it is never served as a call.
	Text bool
}

// Round is one inference round of a Session: an assistant message and the recorded results of
// its calls.
type Round struct {
	// Number is the 1-based round.
	Number int
	// Assistant is the recorded assistant message.
	Assistant Message
	// Results are the recorded tool results, in recorded order; a call whose result was not
	// recorded (the run ended) has none.
	Results []Result
}

// Result is one recorded tool result.
type Result struct {
	// CallIndex is the index of the answered call in Round.Assistant.Calls.
	CallIndex int
	// Content is the recorded tool output (untrusted data; may carry an injection).
	Content string
	// Error is the recorded tool error, "" when none.
	Error string
}

// Structured returns the round's calls that are served as structured calls (every call unless
// the recording marks calls as read from text: those are never served).
func (r Round) Structured() []Call {
	var out []Call
	for _, c := range r.Assistant.Calls {
		if !c.Text {
			out = append(out, c)
		}
	}
	return out
}

// WireID returns the id Airlock's parser gives the round's i-th recorded call: the recorded
// id when it is not empty, else the id Airlock assigns, parse.AssignedCallID(round, k), k being
// the call's index among the served calls (Structured).
func (r Round) WireID(i int) string {
	if i >= 0 && i < len(r.Assistant.Calls) && r.Assistant.Calls[i].ID != "" {
		return r.Assistant.Calls[i].ID
	}
	k := 0
	for j := 0; j < i && j < len(r.Assistant.Calls); j++ {
		if !r.Assistant.Calls[j].Text {
			k++
		}
	}
	return parse.AssignedCallID("", r.Number, k)
}

// Rounds returns the session's rounds in order. It fails with ErrUnsupported when the
// recording has no user message, more than one, or an assistant or tool message before the
// user message; with ErrMalformed when a tool message does not follow an assistant message or
// answers no call of it.
func (s *Session) Rounds() ([]Round, error) {
	user := -1
	for i, m := range s.Messages {
		switch m.Role {
		case RoleSystem:
		case RoleUser:
			if user >= 0 {
				return nil, fmt.Errorf("%w: %d user messages (messages %d and %d): a second exchange cannot be replayed in one turn", ErrUnsupported, s.count(RoleUser), user, i)
			}
			user = i
		case RoleAssistant, RoleTool:
			if user < 0 {
				return nil, fmt.Errorf("%w: %s message %d precedes the user's task (a pipeline step such as a tool filter); serving it would end the turn before the task", ErrUnsupported, m.Role, i)
			}
		default:
			return nil, fmt.Errorf("%w: message %d: unknown role %q", ErrMalformed, i, m.Role)
		}
	}
	if user < 0 {
		return nil, fmt.Errorf("%w: no user message", ErrUnsupported)
	}
	var rounds []Round
	for i := user + 1; i < len(s.Messages); i++ {
		m := s.Messages[i]
		switch m.Role {
		case RoleAssistant:
			rounds = append(rounds, Round{Number: len(rounds) + 1, Assistant: m})
		case RoleTool:
			if len(rounds) == 0 || (s.Messages[i-1].Role != RoleAssistant && s.Messages[i-1].Role != RoleTool) {
				return nil, fmt.Errorf("%w: tool message %d does not follow an assistant message", ErrMalformed, i)
			}
			r := &rounds[len(rounds)-1]
			if m.CallIndex < 0 || m.CallIndex >= len(r.Assistant.Calls) {
				return nil, fmt.Errorf("%w: tool message %d answers call %d; the assistant message has %d calls", ErrMalformed, i, m.CallIndex, len(r.Assistant.Calls))
			}
			for _, prev := range r.Results {
				if prev.CallIndex == m.CallIndex {
					return nil, fmt.Errorf("%w: tool message %d answers call %d a second time", ErrMalformed, i, m.CallIndex)
				}
			}
			r.Results = append(r.Results, Result{CallIndex: m.CallIndex, Content: m.Content, Error: m.Error})
		}
	}
	for i, r := range rounds[:max(0, len(rounds)-1)] {
		if len(r.Assistant.Calls) == 0 {
			// A message without calls is an answer: served, it ends the turn, and the
			// recording's later rounds would never be replayed.
			return nil, fmt.Errorf("%w: assistant message of round %d has no calls but the recording goes on for %d more round(s); serving it would end the turn as answered", ErrUnsupported, i+1, len(rounds)-1-i)
		}
	}
	return rounds, nil
}

// Lookup returns every recorded result for the call a turn proposed as callID in round (0: any
// round, for inputs from before the round was carried) with its recorded call, in round
// order; none when the recording has no result for that id.
func Lookup(rounds []Round, round int, callID string) (matches []Match) {
	// A call recorded without an id was assigned "airlock-<turn>-r<round>-c<i>" by the parser;
	// recordings key it without the turn segment (WireID).
	want := parse.WithoutTurn(callID)
	for _, r := range rounds {
		if round > 0 && r.Number != round {
			continue
		}
		for _, res := range r.Results {
			if r.WireID(res.CallIndex) == want {
				matches = append(matches, Match{Round: r.Number, Call: r.Assistant.Calls[res.CallIndex], Result: res})
			}
		}
	}
	return matches
}

// Match is a recorded call and its result found by Lookup.
type Match struct {
	// Round is the round the call was recorded in.
	Round int
	// Call is the recorded call.
	Call Call
	// Result is its recorded result.
	Result Result
}

func (s *Session) count(role Role) int {
	n := 0
	for _, m := range s.Messages {
		if m.Role == role {
			n++
		}
	}
	return n
}

// Tool is a recorded benchmark tool as the replay capabilities bind it.
type Tool struct {
	// Name is the tool's name.
	Name string
	// Parameters is the tool's parameters as a standard JSON Schema object (adapters convert
	// benchmark-specific schema dialects before building a Tool).
	Parameters json.RawMessage
}
