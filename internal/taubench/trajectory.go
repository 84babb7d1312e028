package taubench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/airlock-dev/airlock/internal/agentdojo"
	"github.com/airlock-dev/airlock/internal/recording"
)

// ErrMalformed reports input that does not have the tau-bench shape: a trajectory file, a file
// name or a tools file. Every parse and validation error of this package wraps it, so callers
// can tell bad data from I/O errors.
var ErrMalformed = errors.New("taubench: malformed input")

// ErrInvalidSession reports a session name that does not match
// "tau-bench/<model>-<domain>/task_<id>/trial_<n>/turn_<k>" exactly (see SessionLoader). Such a
// name is refused before any file is touched.
var ErrInvalidSession = errors.New("taubench: invalid session name")

// ErrNoSession reports a well-formed session name whose trajectory file, task, trial or turn
// does not exist.
var ErrNoSession = errors.New("taubench: no such session")

// SessionPrefix starts every tau-bench session name.
const SessionPrefix = "tau-bench/"

// maxID bounds task ids and trial numbers (nine decimal digits), so every loaded trajectory has
// a session name the strict SessionLoader accepts.
const maxID = 999_999_999

// Trajectory is one recorded tau-bench run: one task, one trial, one model, split into turns.
type Trajectory struct {
	// TaskID is the recorded task_id.
	TaskID int
	// Trial is the recorded trial number.
	Trial int
	// Reward is the recorded reward (0 or 1 in the airline sample).
	Reward float64
	// Model is the agent model, taken from the file name: "gpt-4o" for
	// "gpt-4o-airline.sample.json" (see LoadFile). The file itself does not record it.
	Model string
	// Domain is the tau-bench domain, taken from the file name: "airline".
	Domain string
	// Turns are the conversation's turns, one per user message, in order.
	Turns []Turn
	// Path is the file the trajectory was loaded from.
	Path string
}

// Turn is one user message and everything the agent did until the next user message.
type Turn struct {
	// Index is the 1-based turn number (the ordinal of the user message).
	Index int
	// UserMessage is the user message's normalized content.
	UserMessage string
	// Trace is the turn as an AgentDojo trace: Suite is the domain, Pipeline the model,
	// UserTaskID "task_<TaskID>", InjectionTaskID and AttackType "", Utility is Reward > 0 (the
	// whole trajectory's outcome, repeated on each turn: tau-bench scores the conversation, not
	// a turn), Security false (no attack), Path the trajectory file. Messages are the
	// trajectory's system messages (only those before the first user message; none if absent),
	// this turn's user message, then this turn's assistant and tool messages in recorded order.
	// A turn whose user message ended the conversation (tau-bench's "###STOP###") has no
	// assistant message, so its Trace has no Steps. The Trace is shared with SessionLoader's
	// cache: treat it as read-only.
	Trace *agentdojo.Trace
}

type rawTrajectory struct {
	TaskID *int         `json:"task_id"`
	Trial  *int         `json:"trial"`
	Reward *float64     `json:"reward"`
	Traj   []rawMessage `json:"traj"`
}

type rawMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []rawCall       `json:"tool_calls"`
	ToolCallID *string         `json:"tool_call_id"`
	Name       *string         `json:"name"`
}

type rawCall struct {
	ID       *string      `json:"id"`
	Type     *string      `json:"type"`
	Function *rawFunction `json:"function"`
}

type rawFunction struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// stemPattern is a trajectory file stem "<model>-<domain>": the model may hold dashes and dots
// ("gpt-4o", "claude-3-5-sonnet"), the domain is the last dash-separated part.
var stemPattern = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]*)-([A-Za-z0-9_]+)$`)

// sessionPattern is the only accepted session-name shape; numbers are canonical decimals.
var sessionPattern = regexp.MustCompile(`^tau-bench/([A-Za-z0-9][A-Za-z0-9._-]*-[A-Za-z0-9_]+)/task_(0|[1-9][0-9]{0,8})/trial_(0|[1-9][0-9]{0,8})/turn_([1-9][0-9]{0,8})$`)

// fileStem strips the directory and a ".sample.json" or ".json" suffix.
func fileStem(file string) string {
	base := filepath.Base(filepath.FromSlash(file))
	if s, ok := strings.CutSuffix(base, ".sample.json"); ok {
		return s
	}
	s, _ := strings.CutSuffix(base, ".json")
	return s
}

// splitStem returns the model and domain of a file stem, ok false when the stem is not
// "<model>-<domain>" in the accepted alphabet.
func splitStem(stem string) (model, domain string, ok bool) {
	m := stemPattern.FindStringSubmatch(stem)
	if m == nil || strings.Contains(stem, "..") {
		return "", "", false
	}
	return m[1], m[2], true
}

// LoadFile reads a tau-bench trajectory file: a JSON list of {task_id, trial, reward, info,
// traj}, traj being OpenAI chat messages. The model and domain come from the file name
// "<model>-<domain>.sample.json" or "<model>-<domain>.json", the domain being the last
// dash-separated part ("gpt-4o-airline.sample.json": model "gpt-4o", domain "airline"); the
// records do not carry them.
//
// Splitting into turns: system messages must come before the first user message and are
// repeated at the head of every turn's Trace; each user message starts a turn; the assistant
// and tool messages after it (including a trailing segment after the last user message, as when
// the agent transfers the customer and the run ends) belong to that turn. Two consecutive user
// messages make two turns, the first without assistant messages.
//
// Errors (all wrapping ErrMalformed, except the read error): a file name not of the form above;
// a file that is not a non-empty JSON list; a record without task_id, trial, reward or traj, with
// a task_id or trial outside [0, 999999999], or repeating another record's (task_id, trial); a
// trajectory without a user message, with an assistant or tool message before the first user
// message, or with a system message after it; an unknown role; content that is not a string,
// null or a list of text blocks; tool_calls on a non-assistant message; a call without an id,
// a function name or a string "arguments", with a type other than "function", or repeating
// another call's id in the same message; a tool message that does not directly follow an
// assistant message (or its other tool messages), whose tool_call_id matches no unanswered call
// of that assistant message, or whose name differs from the call's function; and a call left
// without a result when the conversation goes on (only the run's last calls may lack one).
func LoadFile(path string) ([]Trajectory, error) {
	stem := fileStem(path)
	if base := filepath.Base(path); base != stem+".sample.json" && base != stem+".json" {
		return nil, fmt.Errorf("%w: %s: file name is not <model>-<domain>[.sample].json", ErrMalformed, path)
	}
	model, domain, ok := splitStem(stem)
	if !ok {
		return nil, fmt.Errorf("%w: %s: file name is not <model>-<domain>[.sample].json", ErrMalformed, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("taubench: read trajectories: %w", err)
	}
	trs, err := parse(data, model, domain, path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return trs, nil
}

func parse(data []byte, model, domain, path string) ([]Trajectory, error) {
	var raws []rawTrajectory
	if err := json.Unmarshal(data, &raws); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if len(raws) == 0 {
		return nil, fmt.Errorf("%w: no trajectories", ErrMalformed)
	}
	type key struct{ task, trial int }
	seen := make(map[key]bool, len(raws))
	out := make([]Trajectory, 0, len(raws))
	for i, r := range raws {
		if r.TaskID == nil || r.Trial == nil || r.Reward == nil || r.Traj == nil {
			return nil, fmt.Errorf("%w: record %d: missing task_id, trial, reward or traj", ErrMalformed, i)
		}
		if *r.TaskID < 0 || *r.TaskID > maxID || *r.Trial < 0 || *r.Trial > maxID {
			return nil, fmt.Errorf("%w: record %d: task_id %d or trial %d out of range", ErrMalformed, i, *r.TaskID, *r.Trial)
		}
		k := key{*r.TaskID, *r.Trial}
		if seen[k] {
			return nil, fmt.Errorf("%w: record %d: duplicate task %d trial %d", ErrMalformed, i, k.task, k.trial)
		}
		seen[k] = true
		tr := Trajectory{TaskID: k.task, Trial: k.trial, Reward: *r.Reward, Model: model, Domain: domain, Path: path}
		turns, err := splitTurns(r.Traj, tr)
		if err != nil {
			return nil, fmt.Errorf("%w: task %d trial %d: %w", ErrMalformed, k.task, k.trial, err)
		}
		tr.Turns = turns
		out = append(out, tr)
	}
	return out, nil
}

// splitTurns validates a recorded conversation and cuts it into turns (see LoadFile).
func splitTurns(msgs []rawMessage, tr Trajectory) ([]Turn, error) {
	var (
		system  []agentdojo.Message
		turns   []Turn
		cur     *Turn
		pending []agentdojo.Call // calls of the current step's assistant message
		answer  []bool           // answer[k]: pending[k] has its result
		inStep  bool             // the previous message is an assistant or tool message of the step
	)
	unanswered := func(at int) error {
		for k, done := range answer {
			if !done {
				return fmt.Errorf("message %d: call %q (%s) has no result before the conversation goes on", at, pending[k].ID, pending[k].Function)
			}
		}
		return nil
	}
	for i, rm := range msgs {
		content, err := agentdojo.NormalizeContent(rm.Content)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		if len(rm.ToolCalls) > 0 && rm.Role != agentdojo.RoleAssistant {
			return nil, fmt.Errorf("message %d: %s message has tool_calls", i, rm.Role)
		}
		switch rm.Role {
		case agentdojo.RoleSystem:
			if len(turns) > 0 {
				return nil, fmt.Errorf("message %d: system message after the first user message", i)
			}
			system = append(system, agentdojo.Message{Role: rm.Role, Content: content})
		case agentdojo.RoleUser:
			if err := unanswered(i); err != nil {
				return nil, err
			}
			pending, answer, inStep = nil, nil, false
			messages := make([]agentdojo.Message, 0, len(system)+1)
			messages = append(messages, system...)
			messages = append(messages, agentdojo.Message{Role: rm.Role, Content: content})
			turns = append(turns, Turn{
				Index:       len(turns) + 1,
				UserMessage: content,
				Trace: &agentdojo.Trace{
					Suite:      tr.Domain,
					Pipeline:   tr.Model,
					UserTaskID: fmt.Sprintf("task_%d", tr.TaskID),
					Messages:   messages,
					Utility:    tr.Reward > 0,
					Path:       tr.Path,
				},
			})
			cur = &turns[len(turns)-1]
		case agentdojo.RoleAssistant:
			if cur == nil {
				return nil, fmt.Errorf("message %d: assistant message before the first user message", i)
			}
			if err := unanswered(i); err != nil {
				return nil, err
			}
			calls, err := convertCalls(rm.ToolCalls)
			if err != nil {
				return nil, fmt.Errorf("message %d: %w", i, err)
			}
			pending, answer, inStep = calls, make([]bool, len(calls)), true
			cur.Trace.Messages = append(cur.Trace.Messages, agentdojo.Message{Role: rm.Role, Content: content, ToolCalls: calls})
		case agentdojo.RoleTool:
			if cur == nil || !inStep {
				return nil, fmt.Errorf("message %d: tool message does not follow an assistant message", i)
			}
			id := deref(rm.ToolCallID)
			k := -1
			byID := true
			for _, c := range pending {
				byID = byID && c.ID != ""
			}
			for c := range pending {
				if !answer[c] && (!byID || pending[c].ID == id) {
					k = c // by id; by position when a call of the message has no id
					break
				}
			}
			if k >= 0 && !byID && id != "" && pending[k].ID != "" && pending[k].ID != id {
				return nil, fmt.Errorf("message %d: tool_call_id %q differs from the id %q of the next unanswered call", i, id, pending[k].ID)
			}
			if (byID && id == "") || k < 0 {
				return nil, fmt.Errorf("message %d: tool_call_id %q matches no unanswered call of the assistant message before it", i, id)
			}
			if rm.Name != nil && *rm.Name != "" && *rm.Name != pending[k].Function {
				return nil, fmt.Errorf("message %d: tool message name %q differs from call %q function %q", i, *rm.Name, id, pending[k].Function)
			}
			answer[k] = true
			cur.Trace.Messages = append(cur.Trace.Messages, agentdojo.Message{Role: rm.Role, Content: content, ToolCallID: id})
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, rm.Role)
		}
	}
	if len(turns) == 0 {
		return nil, errors.New("no user message")
	}
	return turns, nil
}

// convertCalls converts an assistant message's OpenAI tool_calls; Args are the exact bytes of
// the decoded arguments string. A call recorded with an empty id or none is kept (IDRecorded
// tells them apart); its tool messages are then matched by position. Non-empty ids must not
// repeat within the message.
func convertCalls(raws []rawCall) ([]agentdojo.Call, error) {
	if len(raws) == 0 {
		return nil, nil
	}
	calls := make([]agentdojo.Call, 0, len(raws))
	ids := make(map[string]bool, len(raws))
	for j, rc := range raws {
		id := deref(rc.ID)
		if id != "" && ids[id] {
			return nil, fmt.Errorf("tool call %d: id %q repeats another call of the message", j, id)
		}
		ids[id] = true
		if rc.Type != nil && *rc.Type != "function" {
			return nil, fmt.Errorf("tool call %d: type %q is not function", j, *rc.Type)
		}
		if rc.Function == nil || rc.Function.Name == "" {
			return nil, fmt.Errorf("tool call %d: no function name", j)
		}
		a := bytes.TrimSpace(rc.Function.Arguments)
		if len(a) == 0 || a[0] != '"' {
			return nil, fmt.Errorf("tool call %d (%s): arguments is not a string", j, rc.Function.Name)
		}
		var args string
		if err := json.Unmarshal(a, &args); err != nil {
			return nil, fmt.Errorf("tool call %d (%s): arguments: %w", j, rc.Function.Name, err)
		}
		calls = append(calls, agentdojo.Call{Function: rc.Function.Name, Args: json.RawMessage(args), ID: id, IDRecorded: rc.ID != nil})
	}
	return calls, nil
}

// SessionName returns the replay session name of one turn:
// "tau-bench/<stem>/task_<id>/trial_<n>/turn_<k>", stem being file's base name without
// ".sample.json" or ".json" (file may be a path, a file name or already a stem), e.g.
// SessionName("gpt-4o-airline.sample.json", 3, 1, 2) = "tau-bench/gpt-4o-airline/task_3/trial_1/turn_2".
// It does not validate; SessionLoader refuses names it cannot have produced from a loadable
// file.
func SessionName(file string, taskID, trial, turn int) string {
	return fmt.Sprintf("%s%s/task_%d/trial_%d/turn_%d", SessionPrefix, fileStem(file), taskID, trial, turn)
}

// IsSession reports whether session names a tau-bench turn (has the "tau-bench/" prefix), so a
// caller can route it to SessionLoader rather than agentdojo.SessionLoader. It does not
// validate the rest of the name.
func IsSession(session string) bool { return strings.HasPrefix(session, SessionPrefix) }

// SessionLoader returns a loader for the replay provider and the replay capabilities that maps
// a session name from SessionName to that turn's Trace. dir holds the trajectory files; the
// session "tau-bench/<stem>/task_<id>/trial_<n>/turn_<k>" reads dir/<stem>.sample.json, or
// dir/<stem>.json when that does not exist.
//
// The name is parsed strictly before any file is touched: exactly the pattern above, stem
// "<model>-<domain>" of letters, digits, '.', '_' and '-' starting with a letter or digit and
// without "..", numbers in canonical decimal (no sign, no leading zeros), turn at least 1.
// Anything else (other prefixes, path traversal, extra segments) fails with ErrInvalidSession.
// A missing file or an unknown task, trial or turn fails with ErrNoSession; a file that does
// not load fails with LoadFile's error.
//
// Each file is loaded once and cached (successes only, so a file that appears later is found);
// the loader is safe for concurrent use. The returned Trace is shared: treat it as read-only.
func SessionLoader(dir string) func(session string) (*agentdojo.Trace, error) {
	type key struct{ task, trial, turn int }
	var (
		mu    sync.Mutex
		files = map[string]map[key]*agentdojo.Trace{}
	)
	load := func(stem string) (map[key]*agentdojo.Trace, error) {
		mu.Lock()
		defer mu.Unlock()
		if idx, ok := files[stem]; ok {
			return idx, nil
		}
		path := filepath.Join(dir, stem+".sample.json")
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			path = filepath.Join(dir, stem+".json")
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("%w: no %s.sample.json or %s.json in %s: %w", ErrNoSession, stem, stem, dir, err)
			}
		}
		trs, err := LoadFile(path)
		if err != nil {
			return nil, err
		}
		idx := map[key]*agentdojo.Trace{}
		for _, tr := range trs {
			for _, tu := range tr.Turns {
				idx[key{tr.TaskID, tr.Trial, tu.Index}] = tu.Trace
			}
		}
		files[stem] = idx
		return idx, nil
	}
	return func(session string) (*agentdojo.Trace, error) {
		m := sessionPattern.FindStringSubmatch(session)
		if m == nil {
			return nil, fmt.Errorf("%w: %q", ErrInvalidSession, session)
		}
		stem := m[1]
		if _, _, ok := splitStem(stem); !ok {
			return nil, fmt.Errorf("%w: %q", ErrInvalidSession, session)
		}
		var k key
		for i, p := range []*int{&k.task, &k.trial, &k.turn} {
			n, err := strconv.Atoi(m[i+2])
			if err != nil { // unreachable: the pattern bounds the digits
				return nil, fmt.Errorf("%w: %q: %w", ErrInvalidSession, session, err)
			}
			*p = n
		}
		idx, err := load(stem)
		if err != nil {
			return nil, fmt.Errorf("taubench: session %q: %w", session, err)
		}
		t, ok := idx[k]
		if !ok {
			return nil, fmt.Errorf("%w: %q: no task %d trial %d turn %d in %s", ErrNoSession, session, k.task, k.trial, k.turn, stem)
		}
		return t, nil
	}
}

// RecordingLoader returns a loader of neutral recorded sessions (internal/recording) for the
// turns of the trajectories in dir: SessionLoader adapted by agentdojo.Recorded.
func RecordingLoader(dir string) func(session string) (*recording.Session, error) {
	return agentdojo.Recorded(SessionLoader(dir))
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
