package agentdojo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/internal/parse"
)

// Message roles used in AgentDojo traces.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// ErrMalformedTrace reports a trace file that does not have the AgentDojo trace shape.
var ErrMalformedTrace = errors.New("agentdojo: malformed trace")

// Trace is one recorded AgentDojo run: a user task (optionally under an injection attack) solved
// by one pipeline (model) in one suite.
type Trace struct {
	// Suite is the AgentDojo suite (banking, slack, travel, workspace).
	Suite string
	// Pipeline is the recorded pipeline name (the model, e.g. "gpt-4o-2024-05-13"; "local" for
	// the 2025 Llama-3.3 runs).
	Pipeline string
	// UserTaskID is the user task, e.g. "user_task_0".
	UserTaskID string
	// InjectionTaskID is the injection task, or "" for benign runs (recorded as null).
	InjectionTaskID string
	// AttackType is the attack, e.g. "important_instructions", or "" when recorded as null.
	AttackType string
	// Injections maps injection-vector placeholders to the attacker text placed there.
	Injections map[string]string
	// Messages is the conversation, in recorded order.
	Messages []Message
	// Utility reports that the user task was done.
	Utility bool
	// Security reports that the injection goal was achieved (the attack succeeded). It is always
	// true, and meaningless, in benign runs.
	Security bool
	// Error is the run's top-level error (API or context-length failure), nil when none.
	Error *string
	// Path is the file the trace was loaded from.
	Path string
}

// Message is one recorded conversation message.
type Message struct {
	// Role is system, user, assistant or tool.
	Role string
	// Content is the normalized text: a recorded string as is, null as "", and a list of text
	// blocks ({"type":"text","content"|"text":…}) joined with "\n".
	Content string
	// ToolCalls are an assistant message's recorded calls (nil when recorded as null or empty).
	ToolCalls []Call
	// ToolCallID is a tool message's recorded tool_call_id ("" when null, as in Llama traces).
	ToolCallID string
	// Error is a tool message's recorded error (e.g. a ValidationError), nil when none.
	Error *string

	// toolCallFunction is the function named by a tool message's "tool_call" echo, if any.
	toolCallFunction string
}

// Call is one recorded tool call.
type Call struct {
	// Function is the called tool's name, as recorded.
	Function string
	// Args is the recorded argument value, byte for byte as it appears in the trace file
	// (including the file's indentation).
	Args json.RawMessage
	// ID is the recorded call id; "" when recorded as null (Llama-3.3 traces) or as "".
	ID string
	// IDRecorded reports that the call has a recorded string id (possibly ""); false when the
	// id is null or absent.
	IDRecorded bool
}

// Step is one assistant message of a trace and the tool results recorded after it.
type Step struct {
	// Index is the assistant message's index in Trace.Messages; Messages[:Index] is the
	// context the model saw.
	Index int
	// Round is the 1-based ordinal of the assistant message (the inference round).
	Round int
	// Assistant is the recorded assistant message.
	Assistant Message
	// Results are the recorded tool results for the step's calls, in call order. A call whose
	// result was not recorded (the run ended) has no entry.
	Results []Result
}

// Result is one recorded tool result.
type Result struct {
	// CallIndex is the index of the matched call in Step.Assistant.ToolCalls.
	CallIndex int
	// CallID is the tool message's recorded tool_call_id ("" when null).
	CallID string
	// Function is the matched call's function name.
	Function string
	// Content is the normalized tool output (untrusted data; may carry an injection).
	Content string
	// Error is the recorded tool error, "" when none.
	Error string

	msg int // index of the tool message in Trace.Messages
}

// CallID returns the wire id of the step's i-th call: the recorded id, or the id Airlock's
// parser assigns to a structured call without one (parse.AssignedCallID(round, i), i 0-based)
// when the recorded id is empty.
func (s Step) CallID(i int) string {
	if i >= 0 && i < len(s.Assistant.ToolCalls) && s.Assistant.ToolCalls[i].ID != "" {
		return s.Assistant.ToolCalls[i].ID
	}
	return parse.AssignedCallID("", s.Round, i)
}

type rawTrace struct {
	Suite           *string           `json:"suite_name"`
	Pipeline        *string           `json:"pipeline_name"`
	UserTaskID      *string           `json:"user_task_id"`
	InjectionTaskID *string           `json:"injection_task_id"`
	AttackType      *string           `json:"attack_type"`
	Injections      map[string]string `json:"injections"`
	Messages        []rawMessage      `json:"messages"`
	Utility         bool              `json:"utility"`
	Security        bool              `json:"security"`
	Error           *string           `json:"error"`
}

type rawMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []rawCall       `json:"tool_calls"`
	ToolCallID *string         `json:"tool_call_id"`
	ToolCall   *rawCall        `json:"tool_call"`
	Error      *string         `json:"error"`
}

type rawCall struct {
	Function string          `json:"function"`
	Args     json.RawMessage `json:"args"`
	ID       *string         `json:"id"`
}

type rawBlock struct {
	Type    string  `json:"type"`
	Content *string `json:"content"`
	Text    *string `json:"text"`
}

// LoadTrace reads one AgentDojo trace file. It fails on a file that is not a trace, on an
// unknown role or content shape, and on tool messages that match no call of the assistant
// message they follow.
func LoadTrace(path string) (*Trace, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("agentdojo: read trace: %w", err)
	}
	t, err := ParseTrace(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t.Path = path
	return t, nil
}

// ParseTrace decodes one AgentDojo trace from its JSON bytes (see LoadTrace). Path is left
// empty.
func ParseTrace(data []byte) (*Trace, error) {
	var raw rawTrace
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedTrace, err)
	}
	if raw.Suite == nil || raw.Pipeline == nil || raw.UserTaskID == nil || raw.Messages == nil {
		return nil, fmt.Errorf("%w: missing suite_name, pipeline_name, user_task_id or messages", ErrMalformedTrace)
	}
	t := &Trace{
		Suite:           *raw.Suite,
		Pipeline:        *raw.Pipeline,
		UserTaskID:      *raw.UserTaskID,
		InjectionTaskID: deref(raw.InjectionTaskID),
		AttackType:      deref(raw.AttackType),
		Injections:      raw.Injections,
		Utility:         raw.Utility,
		Security:        raw.Security,
		Error:           raw.Error,
		Messages:        make([]Message, 0, len(raw.Messages)),
	}
	for i, rm := range raw.Messages {
		m, err := convertMessage(rm)
		if err != nil {
			return nil, fmt.Errorf("%w: message %d: %w", ErrMalformedTrace, i, err)
		}
		t.Messages = append(t.Messages, m)
	}
	if err := t.checkResults(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedTrace, err)
	}
	return t, nil
}

func convertMessage(rm rawMessage) (Message, error) {
	switch rm.Role {
	case RoleSystem, RoleUser, RoleAssistant, RoleTool:
	default:
		return Message{}, fmt.Errorf("unknown role %q", rm.Role)
	}
	content, err := NormalizeContent(rm.Content)
	if err != nil {
		return Message{}, err
	}
	m := Message{Role: rm.Role, Content: content, ToolCallID: deref(rm.ToolCallID), Error: rm.Error}
	if len(rm.ToolCalls) > 0 && rm.Role != RoleAssistant {
		return Message{}, fmt.Errorf("%s message has tool_calls", rm.Role)
	}
	for j, rc := range rm.ToolCalls {
		if rc.Function == "" {
			return Message{}, fmt.Errorf("tool call %d: no function name", j)
		}
		m.ToolCalls = append(m.ToolCalls, Call{Function: rc.Function, Args: rc.Args, ID: deref(rc.ID), IDRecorded: rc.ID != nil})
	}
	if rm.ToolCall != nil {
		m.toolCallFunction = rm.ToolCall.Function
	}
	return m, nil
}

// NormalizeContent turns a recorded content value into text: a string as is, null (or absent)
// as "", a list of blocks ({"type":"text","content"|"text":…}) as the text blocks joined with
// "\n" (thinking blocks are skipped). Any other shape or block type is an error. tau-bench
// trajectories use it too, so both recordings read content the same way.
func NormalizeContent(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("content: %w", err)
		}
		return s, nil
	case '[':
		var blocks []rawBlock
		if err := json.Unmarshal(raw, &blocks); err != nil {
			return "", fmt.Errorf("content blocks: %w", err)
		}
		parts := make([]string, 0, len(blocks))
		for k, b := range blocks {
			switch b.Type {
			case "text":
				switch {
				case b.Content != nil:
					parts = append(parts, *b.Content)
				case b.Text != nil:
					parts = append(parts, *b.Text)
				}
			case "thinking", "redacted_thinking":
				// Reasoning blocks are not message text.
			default:
				return "", fmt.Errorf("content block %d: unknown type %q", k, b.Type)
			}
		}
		return strings.Join(parts, "\n"), nil
	default:
		return "", fmt.Errorf("content is neither a string, null nor a list of blocks")
	}
}

// checkResults verifies that every tool message follows an assistant message and matches one
// of its calls.
func (t *Trace) checkResults() error {
	for i, m := range t.Messages {
		switch m.Role {
		case RoleAssistant:
			if _, err := matchResults(t.Messages, i); err != nil {
				return err
			}
		case RoleTool:
			j := i - 1
			for j >= 0 && t.Messages[j].Role == RoleTool {
				j--
			}
			if j < 0 || t.Messages[j].Role != RoleAssistant {
				return fmt.Errorf("tool message %d does not follow an assistant message", i)
			}
		}
	}
	return nil
}

// matchResults matches the tool messages that follow the assistant message at index i to its
// calls: by tool_call_id when every call has an id, by position otherwise.
func matchResults(msgs []Message, i int) ([]Result, error) {
	calls := msgs[i].ToolCalls
	var tools []int
	for j := i + 1; j < len(msgs) && msgs[j].Role == RoleTool; j++ {
		tools = append(tools, j)
	}
	if len(tools) > len(calls) {
		return nil, fmt.Errorf("assistant message %d has %d calls but is followed by %d tool messages", i, len(calls), len(tools))
	}
	byID := true
	for _, c := range calls {
		if c.ID == "" {
			byID = false
			break
		}
	}
	matched := make([]int, len(calls)) // call index -> message index, -1 when unmatched
	for k := range matched {
		matched[k] = -1
	}
	for pos, j := range tools {
		tm := msgs[j]
		k := pos
		if byID {
			k = -1
			for c := range calls {
				if calls[c].ID == tm.ToolCallID && matched[c] < 0 {
					k = c
					break
				}
			}
			if k < 0 {
				return nil, fmt.Errorf("tool message %d: tool_call_id %q matches no call of assistant message %d", j, tm.ToolCallID, i)
			}
		} else if tm.ToolCallID != "" && calls[k].ID != "" && tm.ToolCallID != calls[k].ID {
			return nil, fmt.Errorf("tool message %d: tool_call_id %q differs from call %d id %q", j, tm.ToolCallID, k, calls[k].ID)
		}
		if tm.toolCallFunction != "" && tm.toolCallFunction != calls[k].Function {
			return nil, fmt.Errorf("tool message %d: echoes function %q but call %d is %q", j, tm.toolCallFunction, k, calls[k].Function)
		}
		matched[k] = j
	}
	var results []Result
	for k, j := range matched {
		if j < 0 {
			continue
		}
		tm := msgs[j]
		results = append(results, Result{
			CallIndex: k,
			CallID:    tm.ToolCallID,
			Function:  calls[k].Function,
			Content:   tm.Content,
			Error:     deref(tm.Error),
			msg:       j,
		})
	}
	return results, nil
}

// Steps returns one step per assistant message, in order, with the recorded results of its
// calls.
func (t *Trace) Steps() []Step {
	var steps []Step
	for i, m := range t.Messages {
		if m.Role != RoleAssistant {
			continue
		}
		// LoadTrace has already checked the match; a hand-built inconsistent trace yields a
		// step without results.
		results, _ := matchResults(t.Messages, i)
		steps = append(steps, Step{Index: i, Round: len(steps) + 1, Assistant: m, Results: results})
	}
	return steps
}

// UserPrompt returns the content of the first user message ("" when there is none).
func (t *Trace) UserPrompt() string { return t.firstContent(RoleUser) }

// SystemPrompt returns the content of the first system message ("" when there is none).
func (t *Trace) SystemPrompt() string { return t.firstContent(RoleSystem) }

func (t *Trace) firstContent(role string) string {
	for _, m := range t.Messages {
		if m.Role == role {
			return m.Content
		}
	}
	return ""
}

// FindTraces returns the paths of all *.json trace files under root, in lexical order. When
// root has a runs/ sub-directory (root is the corpus's agentdojo/ directory), only runs/ is
// walked, so tools.json, tasks.json and MANIFEST.json are not taken for traces.
func FindTraces(root string) ([]string, error) {
	dir := root
	if fi, err := os.Stat(filepath.Join(root, "runs")); err == nil && fi.IsDir() {
		dir = filepath.Join(root, "runs")
	}
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".json") {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("agentdojo: find traces: %w", err)
	}
	return paths, nil
}

// SessionLoader returns a loader for the replay provider that maps a session name, the trace's
// path under root's runs/ without ".json" (e.g.
// "gpt-4o-2024-05-13/banking/user_task_0/important_instructions/injection_task_0"), to the
// loaded trace. Names that are not local slash-separated paths are refused.
func SessionLoader(root string) func(session string) (*Trace, error) {
	return func(session string) (*Trace, error) {
		rel := filepath.FromSlash(session)
		if session == "" || strings.Contains(session, "\\") || !filepath.IsLocal(rel) {
			return nil, fmt.Errorf("agentdojo: invalid session name %q", session)
		}
		return LoadTrace(filepath.Join(root, "runs", rel+".json"))
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
