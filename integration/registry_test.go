package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

func accEntry(id, tool, status, extra string, version int) string {
	return fmt.Sprintf(`{"capability/id":%q,"version":%d,"owner":"tests","surfaces":["host-local"],"wire/name":"app/%s","status":%q%s,
  "flags":{"dispatchable":true,"advertisable":false,"passport/eligible":false,"signing-domain":false,"host-route":true,"federated-discovery":false},
  "airlock":{"tool/name":%q,"description":"%s.","side-effect":"none","network":"local","per-turn/cap":5,"timeout":"10s","model-visible":true,"schema/ref":"acc:%s"}}`,
		id, version, id, status, extra, tool, tool, tool)
}

// accReserved is a reserved entry: registered (the name is held) without the airlock block.
func accReserved(id string, version int) string {
	return fmt.Sprintf(`{"capability/id":%q,"version":%d,"owner":"tests","surfaces":["host-local"],"wire/name":"app/%s.v%d","status":"reserved",
  "flags":{"dispatchable":true,"advertisable":false,"passport/eligible":false,"signing-domain":false,"host-route":true,"federated-discovery":false}}`,
		id, version, id, version)
}

func accRegistry(entries ...string) string {
	return `{"schema/v":"capability-registry.v1","revision":"acc","entries":[` + strings.Join(entries, ",") + `]}`
}

// accPolicy grants "*" acc.read; acc.secret needs acc.admin, which nobody holds.
const accPolicy = `{"schema/v":"capability-authorization-policy.v1","revision":"acc","grants":["acc.read","acc.admin"],
 "principals":[{"principal":"*","grants":["acc.read"]}],
 "capabilities":[
  {"capability/id":"acc.echo","version":1,"grants/required":["acc.read"],"autonomy":"automatic","approval/distinct-approver":false},
  {"capability/id":"acc.lookup","version":1,"grants/required":["acc.read"],"autonomy":"automatic","approval/distinct-approver":false},
  {"capability/id":"acc.lookup","version":2,"grants/required":["acc.read"],"autonomy":"automatic","approval/distinct-approver":false},
  {"capability/id":"acc.old","version":1,"grants/required":["acc.read"],"autonomy":"automatic","approval/distinct-approver":false},
  {"capability/id":"acc.secret","version":1,"grants/required":["acc.admin"],"autonomy":"automatic","approval/distinct-approver":false}]}`

// Acceptance of issue 9 on a real Temporal dev server and PostgreSQL: a worker serving
// registry and policy files reloads them live. A registry change (a new version, a schema
// change, a status change to reserved) shows in the next request's catalog and in resolve
// with no second edit; an unregistered, a reserved and a past-deadline deprecated capability
// proposed by the model are rejected at resolve and audited; a registered but ungranted one is
// rejected at policy; a reload with a broken file keeps the old revision serving and says why.
func TestRegistryLiveReloadAcceptance(t *testing.T) {
	e := newDurEnv(t)
	dir := t.TempDir()
	regFile, polFile := filepath.Join(dir, "registry.json"), filepath.Join(dir, "policy.json")
	write := func(path, doc string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	schemaV1 := `{"type":"object","additionalProperties":false,"properties":{"text":{"type":"string"}}}`
	schemaV2 := `{"type":"object","additionalProperties":false,"required":["key"],"properties":{"key":{"type":"string","format":"uuid"}}}`
	write(regFile, accRegistry(accEntry("acc.echo", "echo", "active", "", 1), accEntry("acc.lookup", "lookup", "active", "", 1), accReserved("acc.lookup", 2),
		accEntry("acc.old", "old", "deprecated", `,"removal/deadline":"2000-01-01T00:00:00Z"`, 1), accEntry("acc.secret", "secret", "active", "", 1)))
	write(polFile, accPolicy)
	// Capabilities defined by JSON Schema at runtime: one implementation per registered entry,
	// nothing else (an unregistered dynamic capability is never admitted).
	load := func() (*registry.Registry, error) {
		rs, err := registry.FileSource(regFile)
		if err != nil {
			return nil, err
		}
		ps, err := registry.FileSource(polFile)
		if err != nil {
			return nil, err
		}
		ents, err := registry.Entries(rs)
		if err != nil {
			return nil, err
		}
		var impls []registry.Implementation
		for _, en := range ents {
			if en.Status == registry.StatusReserved && en.Airlock.ToolName == "" {
				continue // a held name: nothing to run
			}
			schema := schemaV1
			if en.Version == 2 {
				schema = schemaV2
			}
			tool := en.Airlock.ToolName
			impls = append(impls, registry.Implementation{ID: en.ID, Version: en.Version, Schema: json.RawMessage(schema),
				Invoke: func(_ context.Context, inv registry.Invocation) (registry.Output, error) {
					e.rec.add(tool, inv.Arguments)
					return registry.Output{Data: json.RawMessage(`"ok"`)}, nil
				}})
		}
		return registry.Load([]registry.Source{rs, ps}, impls)
	}
	first, err := load()
	if err != nil {
		t.Fatal(err)
	}
	live := registry.NewLive(first)
	scripts := []*inference.Scripted{
		inference.NewScripted(json.RawMessage(calls(call("a1", "echo", `{"text":"hi"}`))), json.RawMessage(answer("one"))),
		inference.NewScripted(json.RawMessage(calls(call("b1", "echo", `{"text":"hi"}`), call("b2", "ghost", `{}`), call("b3", "old", `{}`),
			call("b4", "secret", `{}`), call("b5", "lookup", `{"key":"0f8fad5b-d9cb-469f-a165-70867728950e"}`))),
			json.RawMessage(answer("two"))),
		inference.NewScripted(json.RawMessage(calls(call("c1", "lookup", `{"key":"not-a-uuid"}`))), json.RawMessage(answer("three"))),
	}
	model := &turnScripts{}
	st, err := store.Open(context.Background(), e.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	acts := &activities.Activities{Served: live, Store: st, Live: model, ApproverKey: e.key, Approvers: testApprovers(), Clients: testClients()}
	w := workers.New(e.c, acts, e.queue)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reloads := make(chan error, 8)
	watcher := &registry.Watcher{Live: live, Load: load, Files: []string{regFile, polFile}, Interval: 20 * time.Millisecond,
		OnReload: func(_ string, _ bool, err error) { reloads <- err }}
	watcher.Prime()
	go func() { _ = watcher.Run(ctx) }()
	nextReload := func() error {
		t.Helper()
		select {
		case err := <-reloads:
			return err
		case <-time.After(20 * time.Second):
			t.Fatal("no reload seen")
			return nil
		}
	}
	runTurn := func(seq int) workflows.TurnResult {
		t.Helper()
		model.cur.Store(scripts[seq-1])
		run, _ := e.startTurn("registry", seq, workflows.TurnRequest{Message: "go", Principal: "ops"})
		var res workflows.TurnResult
		if err := run.Get(context.Background(), &res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	outcomes := func(res workflows.TurnResult) []string {
		var out []string
		for _, o := range res.Outcomes {
			s := string(o.Outcome)
			if o.Reason != "" {
				s += ":" + string(o.Stage) + ":" + o.Reason
			}
			out = append(out, s)
		}
		return out
	}
	catalog := func(turn int) []string {
		var names []string
		for _, tl := range scripts[turn-1].Requests()[0].Tools {
			names = append(names, tl.Name)
		}
		slices.Sort(names)
		return names
	}

	// Turn 1 under the first revision.
	if got := outcomes(runTurn(1)); strings.Join(got, " ") != "executed" {
		t.Fatalf("turn 1: %v", got)
	}
	if got := catalog(1); strings.Join(got, ",") != "echo,lookup,secret" {
		t.Fatalf("first catalog (the past-deadline deprecated entry is left out): %v", got)
	}

	// The operator edits the file: echo reserved, lookup at version 2 with a new schema.
	start := time.Now()
	write(regFile, accRegistry(accEntry("acc.echo", "echo", "reserved", "", 1), accReserved("acc.lookup", 1), accEntry("acc.lookup", "lookup", "active", "", 2),
		accEntry("acc.old", "old", "deprecated", `,"removal/deadline":"2000-01-01T00:00:00Z"`, 1), accEntry("acc.secret", "secret", "active", "", 1)))
	if err := nextReload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	t.Logf("edit to swapped revision: %s (poll interval 20ms)", time.Since(start))
	res := runTurn(2)
	want := []string{
		"rejected:resolve:" + registry.RefusalReserved,
		"rejected:resolve:" + registry.RefusalUnregistered,
		"rejected:resolve:" + registry.RefusalPastDeadline,
		"rejected:policy:" + registry.PolicyUngranted,
		"executed",
	}
	if got := outcomes(res); !slices.Equal(got, want) {
		t.Fatalf("turn 2 outcomes = %v, want %v (%s: %+v)", got, want, res.EndReason, res.Outcomes)
	}
	if res.Outcomes[4].Version != 2 {
		t.Fatalf("lookup must resolve to the new version: %+v", res.Outcomes[4])
	}
	if got := catalog(2); strings.Join(got, ",") != "lookup,secret" {
		t.Fatalf("catalog after the reload: %v", got)
	}
	var params map[string]any
	for _, tl := range scripts[1].Requests()[0].Tools {
		if tl.Name == "lookup" {
			_ = json.Unmarshal(tl.Parameters, &params)
		}
	}
	if !strings.Contains(fmt.Sprint(params), "uuid") {
		t.Fatalf("the new schema is in the catalog: %v", params)
	}
	audit, err := st.ListAudit(context.Background(), res.WorkflowID)
	if err != nil {
		t.Fatal(err)
	}
	var audited []string
	for _, a := range audit {
		if a.Outcome == string(activities.OutcomeRejected) {
			audited = append(audited, a.Stage+":"+a.Reason)
		}
	}
	if len(audited) != 4 {
		t.Fatalf("every rejection is audited: %v", audited)
	}

	// A broken edit (the policy lets an unknown capability run) is refused; the revision served
	// stays, and the refusal says why.
	served := live.Current().Revision()
	write(polFile, strings.Replace(accPolicy, `"acc.secret"`, `"acc.secrets"`, 1))
	rerr := nextReload()
	if rerr == nil || !strings.Contains(rerr.Error(), "[policy-capability-ref]") || live.Current().Revision() != served {
		t.Fatalf("broken reload: %v; serving %s", rerr, live.Current().Revision())
	}
	if !strings.Contains(live.Status().LastError, "acc.secrets@1") {
		t.Fatalf("status must say why: %+v", live.Status())
	}
	// The old revision keeps serving: format asserted by its lookup@2 schema.
	if got := outcomes(runTurn(3)); strings.Join(got, " ") != "rejected:validate:schema_mismatch" {
		t.Fatalf("turn 3 under the kept revision: %v", got)
	}
	if got := e.rec.of("lookup"); len(got) != 1 {
		t.Fatalf("lookup ran %d times", len(got))
	}
}

// turnScripts serves each turn from its own scripted session (turns run one after another).
type turnScripts struct {
	cur atomic.Pointer[inference.Scripted]
}

func (m *turnScripts) Complete(ctx context.Context, req inference.Request) (inference.Response, error) {
	return m.cur.Load().Complete(ctx, req)
}
