package capabilities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/airlock-dev/airlock/internal/canonical"
	"github.com/airlock-dev/airlock/internal/recording"
	"github.com/airlock-dev/airlock/registry"
)

// ErrNoRecording reports a call the recorded session has no result for: Airlock's run
// diverged from the recording (for example the model's call ids or arguments differ).
var ErrNoRecording = errors.New("capabilities: no recorded result for this call")

// TraceLoader loads the recorded session a replay turn names (for example
// agentdojo.Recorded(agentdojo.SessionLoader(dir))).
type TraceLoader func(session string) (*recording.Session, error)

// AgentDojoReplay binds every registry entry whose airlock schema/ref is
// "agentdojo:<suite>/<tool>" to a replay capability (see RecordedReplay).
func AgentDojoReplay(entries []registry.Entry, tools map[string][]recording.Tool, load TraceLoader) ([]registry.Implementation, error) {
	return RecordedReplay("agentdojo", entries, tools, load)
}

// RecordedReplay binds every registry entry whose airlock schema/ref is
// "<scheme>:<suite>/<tool>" to a capability defined by JSON Schema (the tool's standard
// parameters, closed to unknown top-level properties, so stage 2 rejects extra arguments as it
// does for Go types) that serves the recorded tool result for the call from the session's
// recording. tools maps a suite (or domain) to its tools. The side-effect class comes from the
// registry entry, never from the recording. Entries with another scheme are skipped. Errors
// name the entry whose tool is missing from the tools.
func RecordedReplay(scheme string, entries []registry.Entry, tools map[string][]recording.Tool, load TraceLoader) ([]registry.Implementation, error) {
	cache := &traceCache{load: load, rounds: map[string][]recording.Round{}}
	var out []registry.Implementation
	for _, e := range entries {
		ref, ok := strings.CutPrefix(e.Airlock.SchemaRef, scheme+":")
		if !ok {
			continue
		}
		suite, name, ok := strings.Cut(ref, "/")
		if !ok {
			return nil, fmt.Errorf("capabilities: %s: schema/ref %q is not %s:<suite>/<tool>", e.Key(), e.Airlock.SchemaRef, scheme)
		}
		var tool *recording.Tool
		for i := range tools[suite] {
			if tools[suite][i].Name == name {
				tool = &tools[suite][i]
			}
		}
		if tool == nil {
			return nil, fmt.Errorf("capabilities: %s: tool %s/%s is not in the tools file", e.Key(), suite, name)
		}
		schema, err := closedSchema(tool.Parameters)
		if err != nil {
			return nil, fmt.Errorf("capabilities: %s: %w", e.Key(), err)
		}
		out = append(out, registry.Implementation{ID: e.ID, Version: e.Version, Schema: schema, Invoke: cache.invoke(name)})
	}
	return out, nil
}

func closedSchema(std json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(std, &m); err != nil {
		return nil, fmt.Errorf("tool parameters are not a JSON Schema object: %w", err)
	}
	if _, set := m["additionalProperties"]; !set {
		m["additionalProperties"] = json.RawMessage("false")
	}
	return json.Marshal(m)
}

type traceCache struct {
	load   TraceLoader
	mu     sync.Mutex
	rounds map[string][]recording.Round
}

func (c *traceCache) get(session string) ([]recording.Round, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.rounds[session]; ok {
		return r, nil
	}
	s, err := c.load(session)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, errors.New("no recording")
	}
	r, err := s.Rounds()
	if err != nil {
		return nil, err
	}
	c.rounds[session] = r
	return r, nil
}

// invoke serves the recorded result of the call with inv.CallID. A recorded tool error (for
// example a ValidationError) is returned as Output.Error, as the original run saw it.
//
// The result is the one recorded for the call in the same round (inv.Round: the replay
// provider serves the round-th recorded assistant message) with the same wire id (the recorded
// id, or the id Airlock assigned to a call recorded without one: recording.Round.WireID),
// which is unique within one response; its function and arguments (canonical JSON) must match
// too. Recordings reuse call ids across rounds (tau-bench does, even within a turn), so the
// round is what tells such calls apart. Without a round (inputs from before it was carried)
// every round is searched. A call the recording does not have is ErrNoRecording: serving
// another call's result would hide a divergence.
func (c *traceCache) invoke(name string) func(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	return func(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
		if inv.Session == "" {
			return registry.Output{}, fmt.Errorf("capabilities: %s is a replay capability and needs a recorded session", name)
		}
		rounds, err := c.get(inv.Session)
		if err != nil {
			return registry.Output{}, fmt.Errorf("capabilities: load session %s: %w", inv.Session, err)
		}
		want, _ := canonical.Canonicalize(inv.Arguments)
		other, sameName := "", false
		for _, m := range recording.Lookup(rounds, inv.Round, inv.CallID) {
			if m.Call.Name != name {
				other = m.Call.Name
				continue
			}
			if got, err := canonical.Canonicalize(m.Call.Args); err == nil && want != nil && bytes.Equal(got, want) {
				return output(m.Result), nil
			}
			sameName = true
		}
		if sameName {
			return registry.Output{}, fmt.Errorf("%w: call %s of %s was recorded with other arguments", ErrNoRecording, inv.CallID, name)
		}
		if other != "" {
			return registry.Output{}, fmt.Errorf("%w: call %s was recorded for %s, not %s", ErrNoRecording, inv.CallID, other, name)
		}
		return registry.Output{}, fmt.Errorf("%w: %s in session %s", ErrNoRecording, inv.CallID, inv.Session)
	}
}

func output(r recording.Result) registry.Output {
	data, _ := json.Marshal(r.Content)
	return registry.Output{Data: data, Error: r.Error}
}
