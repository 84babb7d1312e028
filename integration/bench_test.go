package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/eval"
	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/token"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

// BenchmarkTurnThroughput measures whole turns on the real dev server and PostgreSQL, with
// every check in place (strict parse, resolve, validate, policy, budgets, audit, context
// persistence): a zero-latency scripted model proposes 3 automatic tool calls
// (system_health), then answers; 16 turns in flight (DESIGN "Choose regular or local
// activities": target >= 34 turns/s, LangGraph.js with its Postgres checkpointer).
// Reports turns/s and history events per turn.
//
// Two model classes: "recorded" serves the script as a recorded session (Infer is a local
// activity, as for replays), "network" as a live model would be served (Infer is a regular
// activity, a durable server round trip per round).
func BenchmarkTurnThroughput(b *testing.B) {
	b.Run("recorded", func(b *testing.B) { benchTurns(b, true) })
	b.Run("network", func(b *testing.B) { benchTurns(b, false) })
}

func benchTurns(b *testing.B, recorded bool) {
	const inFlight = 16
	c := dial(b)
	st, err := store.Open(context.Background(), freshDB(b))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	reg, err := workers.LoadRegistry(config.Config{}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	three := fmt.Sprintf(`{"id":"b","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[%s,%s,%s]},"finish_reason":"tool_calls"}]}`,
		call("c1", "system_health", `{}`), call("c2", "system_health", `{}`), call("c3", "system_health", `{}`))
	key, err := token.LoadOrCreateKey(filepath.Join(b.TempDir(), "k"))
	if err != nil {
		b.Fatal(err)
	}
	model := inference.NewScripted(json.RawMessage(three), json.RawMessage(answer("healthy")))
	acts := &activities.Activities{Registry: reg, Store: st, ApproverKey: key, Live: model, Replay: model, Approvers: testApprovers(), Clients: testClients()}
	session := ""
	if recorded {
		session = "bench"
	}
	queue := taskQueue(b)
	w := workers.New(c, acts, queue)
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	defer w.Stop()

	runTurn := func(i int) (string, error) {
		conv := fmt.Sprintf("bench-%s-%d", queue, i)
		run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
			ID: workflows.TurnWorkflowID(conv, 1), TaskQueue: queue, EnableEagerStart: true,
			TypedSearchAttributes: temporal.NewSearchAttributes(workflows.AttrConversation.ValueSet(conv),
				workflows.AttrStatus.ValueSet(workflows.StatusRunning))}, workers.TurnWorkflowName,
			workflows.TurnRequest{Conversation: conv, Message: "how is the host?", Session: session})
		if err != nil {
			return "", err
		}
		var res workflows.TurnResult
		if err := run.Get(context.Background(), &res); err != nil {
			return "", err
		}
		if len(res.Outcomes) != 3 || res.EndReason != "answered" {
			return "", fmt.Errorf("turn %s: %+v", run.GetID(), res.Outcomes)
		}
		return run.GetID(), nil
	}
	if _, err := runTurn(-1); err != nil { // warm up the worker and the caches
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	var lastID string
	sem := make(chan struct{}, inFlight)
	for i := 0; i < b.N; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			id, err := runTurn(i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			lastID = id
		}(i)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "turns/s")
	it := c.GetWorkflowHistory(context.Background(), lastID, "", false, 0)
	events := 0
	var t0 time.Time
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			b.Fatal(err)
		}
		if events == 0 {
			t0 = e.GetEventTime().AsTime()
		}
		if testing.Verbose() {
			b.Logf("%4dms %s", e.GetEventTime().AsTime().Sub(t0).Milliseconds(), e.GetEventType())
		}
		events++
	}
	b.ReportMetric(float64(events), "events/turn")
}

// BenchmarkEvalReplay measures the evaluation's replay on the real dev server and PostgreSQL:
// b.N recorded AgentDojo runs (all 256 of the corpus, cycled), 8 at once, under deny-all, so
// every consequential call is held, decided by the evaluation's approver and audited. Reports
// turns/s and history events per turn.
func BenchmarkEvalReplay(b *testing.B) {
	all, err := eval.LoadAgentDojo(corpusDir, eval.Filter{})
	if err != nil {
		b.Fatal(err)
	}
	cases := make([]*eval.Case, b.N)
	for i := range cases {
		cases[i] = all[i%len(all)]
	}
	st, err := store.Open(context.Background(), freshDB(b))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	b.ResetTimer()
	results, elapsed, err := eval.Run(context.Background(), eval.Options{Client: dial(b), Store: st,
		Corpus: eval.Corpus{AgentDojoDir: corpusDir}, Policy: eval.PolicyDenyAll, Concurrency: 8}, cases)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	rep := eval.Build(results, eval.PolicyDenyAll, 8, elapsed, time.Now())
	if len(rep.Errors) > 0 {
		b.Fatalf("evaluation errors: %v", rep.Errors)
	}
	var events float64
	for _, r := range rep.Rows {
		events += r.HistoryEventsPerTurn * float64(r.Turns)
	}
	b.ReportMetric(rep.TurnsPerSecond, "turns/s")
	b.ReportMetric(events/float64(rep.Turns), "events/turn")
}
