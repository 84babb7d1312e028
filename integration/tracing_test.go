package integration

import (
	"context"
	"sort"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/telemetry"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

// With the tracing interceptor on the client that starts a turn and on the worker's client, a
// turn is one trace: the start, the workflow run and a span per activity (the model call, the
// executed capability; local activities included), every span carrying the workflow id.
func TestTurnIsOneTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	tracing, err := telemetry.TracingInterceptorWith(tp)
	if err != nil {
		t.Fatal(err)
	}
	model := newFakeModel(t, calls(call("call_1", "system_health", "{}")))
	t.Setenv("AIRLOCK_OPENAI_BASE_URL", model.URL+"/v1")
	t.Setenv("AIRLOCK_OPENAI_API_KEY", "test")
	t.Setenv("AIRLOCK_OPENAI_MODEL", "fake")
	cfg := testConfig(t)
	o := client.Options{HostPort: devServer.Address, Namespace: devServer.Namespace, Logger: quietLogger(),
		Interceptors: append(signing(), tracing)}
	config.TuneForLoopback(&o)
	c, err := client.Dial(o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deps, err := workers.Build(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer deps.Close()
	w := workers.New(c, deps.Activities, cfg.TaskQueue)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "trace", Principal: "user", Message: "how is the host?"})
	if res := result(t, run); outcomeList(res) != "system_health:executed" {
		t.Fatalf("outcomes = %s", outcomeList(res))
	}
	w.Stop()

	spans := rec.Ended()
	traces := map[string]bool{}
	var names []string
	for _, s := range spans {
		traces[s.SpanContext().TraceID().String()] = true
		names = append(names, s.Name())
		wf := ""
		for _, a := range s.Attributes() {
			if a.Key == "temporalWorkflowID" {
				wf = a.Value.AsString()
			}
		}
		if wf != run.GetID() {
			t.Errorf("span %s has workflow id %q, want %q", s.Name(), wf, run.GetID())
		}
	}
	sort.Strings(names)
	all := strings.Join(names, " ")
	if len(traces) != 1 {
		t.Errorf("%d traces, want 1: %s", len(traces), all)
	}
	for _, want := range []string{"StartWorkflow:TurnWorkflow", "RunWorkflow:TurnWorkflow", "RunActivity:Infer", "RunActivity:Execute"} {
		if !strings.Contains(all, want) {
			t.Errorf("no span %s among %s", want, all)
		}
	}
	t.Logf("spans: %s", all)
}
