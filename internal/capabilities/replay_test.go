package capabilities

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/airlock-dev/airlock/internal/agentdojo"
	"github.com/airlock-dev/airlock/internal/recording"
	"github.com/airlock-dev/airlock/registry"
)

// A recording that reuses one call id for three calls of a session (as tau-bench's does):
// each call must get its own recorded result, told apart by function and arguments.
const reusedIDs = `{"suite_name":"airline","pipeline_name":"m","user_task_id":"task_2","messages":[
 {"role":"user","content":"go"},
 {"role":"assistant","content":null,"tool_calls":[{"function":"think","args":{"thought":"x"},"id":"call_A"}]},
 {"role":"tool","content":"thought","tool_call_id":"call_A"},
 {"role":"assistant","content":null,"tool_calls":[{"function":"search","args":{"origin":"MCO","destination":"BOS"},"id":"call_A"}]},
 {"role":"tool","content":"MCO-BOS flights","tool_call_id":"call_A"},
 {"role":"assistant","content":null,"tool_calls":[{"function":"search","args":{"origin":"DEN","destination":"LAS"},"id":"call_A"}]},
 {"role":"tool","content":"DEN-LAS flights","tool_call_id":"call_A"},
 {"role":"assistant","content":"done"}]}`

func TestRecordedReplayTellsReusedCallIDsApart(t *testing.T) {
	tr, err := agentdojo.ParseTrace([]byte(reusedIDs))
	if err != nil {
		t.Fatal(err)
	}
	load := agentdojo.Recorded(func(string) (*agentdojo.Trace, error) { return tr, nil })
	tools := map[string][]recording.Tool{"airline": {
		{Name: "think", Parameters: json.RawMessage(`{"type":"object","properties":{"thought":{"type":"string"}}}`)},
		{Name: "search", Parameters: json.RawMessage(`{"type":"object","properties":{"origin":{"type":"string"},"destination":{"type":"string"}}}`)},
	}}
	entries := []registry.Entry{
		{ID: "t.think", Version: 1, Airlock: registry.Airlock{ToolName: "think", SchemaRef: "tau-bench:airline/think"}},
		{ID: "t.search", Version: 1, Airlock: registry.Airlock{ToolName: "search", SchemaRef: "tau-bench:airline/search"}},
		{ID: "other", Version: 1, Airlock: registry.Airlock{ToolName: "x", SchemaRef: "agentdojo:banking/x"}},
	}
	impls, err := RecordedReplay("tau-bench", entries, tools, load)
	if err != nil {
		t.Fatal(err)
	}
	if len(impls) != 2 {
		t.Fatalf("bound %d implementations, want 2 (the agentdojo: entry is another scheme)", len(impls))
	}
	search := impls[1]
	ctx := context.Background()
	for _, c := range []struct{ args, want string }{
		{`{"destination":"LAS","origin":"DEN"}`, `"DEN-LAS flights"`}, // key order does not matter
		{`{"origin":"MCO","destination":"BOS"}`, `"MCO-BOS flights"`},
	} {
		out, err := search.Invoke(ctx, registry.Invocation{Session: "s", CallID: "call_A", Arguments: json.RawMessage(c.args)})
		if err != nil || string(out.Data) != c.want {
			t.Errorf("search %s = %s, %v; want %s", c.args, out.Data, err, c.want)
		}
	}
	if out, err := impls[0].Invoke(ctx, registry.Invocation{Session: "s", CallID: "call_A", Arguments: json.RawMessage(`{"thought":"x"}`)}); err != nil || string(out.Data) != `"thought"` {
		t.Errorf("think = %s, %v", out.Data, err)
	}
	// With the round, the call is found in its own round only.
	if out, err := search.Invoke(ctx, registry.Invocation{Session: "s", Round: 3, CallID: "call_A", Arguments: json.RawMessage(`{"origin":"DEN","destination":"LAS"}`)}); err != nil || string(out.Data) != `"DEN-LAS flights"` {
		t.Errorf("round 3 search = %s, %v", out.Data, err)
	}
	if _, err := search.Invoke(ctx, registry.Invocation{Session: "s", Round: 2, CallID: "call_A", Arguments: json.RawMessage(`{"origin":"DEN","destination":"LAS"}`)}); !errors.Is(err, ErrNoRecording) {
		t.Errorf("round 2 with round 3's arguments: %v, want ErrNoRecording", err)
	}
	if _, err := search.Invoke(ctx, registry.Invocation{Session: "s", CallID: "call_B", Arguments: json.RawMessage(`{}`)}); !errors.Is(err, ErrNoRecording) {
		t.Errorf("unknown call id: %v, want ErrNoRecording", err)
	}
	// Arguments the recording never had: no other call's result is served.
	if out, err := search.Invoke(ctx, registry.Invocation{Session: "s", CallID: "call_A", Arguments: json.RawMessage(`{"origin":"SFO","destination":"JFK"}`)}); !errors.Is(err, ErrNoRecording) {
		t.Errorf("unrecorded arguments = %s, %v; want ErrNoRecording", out.Data, err)
	}
}

// The replay capabilities serve the recorded result of a call recorded without an id under the
// id Airlock assigns it (round 1, index 1 of the step with three id-less calls).
func TestRecordedReplayServesAssignedIDs(t *testing.T) {
	dir := "../recording/testdata/idless"
	all, err := agentdojo.LoadTools(dir + "/tools.json")
	if err != nil {
		t.Fatal(err)
	}
	tools, err := agentdojo.RecordingTools(all["shop"])
	if err != nil {
		t.Fatal(err)
	}
	entries := []registry.Entry{{ID: "s.get", Version: 1, Airlock: registry.Airlock{ToolName: "get_item", SchemaRef: "agentdojo:shop/get_item"}}}
	impls, err := AgentDojoReplay(entries, map[string][]recording.Tool{"shop": tools}, agentdojo.Recorded(agentdojo.SessionLoader(dir)))
	if err != nil || len(impls) != 1 {
		t.Fatalf("%d impls, %v", len(impls), err)
	}
	inv := registry.Invocation{Session: "my-model/shop/user_task_2/none/none", Round: 1, CallID: "airlock-r1-c1", Arguments: json.RawMessage(`{"id":"8"}`)}
	out, err := impls[0].Invoke(context.Background(), inv)
	if err != nil || string(out.Data) != `"item 8: a chair"` {
		t.Fatalf("get_item = %s, %v", out.Data, err)
	}
	inv.CallID = "airlock-r1-c0"
	if _, err := impls[0].Invoke(context.Background(), inv); !errors.Is(err, ErrNoRecording) {
		t.Fatalf("other arguments: %v", err)
	}
}
