package integration

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/airlock-dev/airlock/workflows"
)

// `airlock worker` exports its traces over OTLP when the standard OTEL_EXPORTER_OTLP_*
// variables are set (issue 19, item 1): a real worker process, a real OTLP/HTTP receiver
// written here; the turn's workflow and activity spans arrive under the service name given.
func TestWorkerExportsTracesOverOTLP(t *testing.T) {
	var mu sync.Mutex
	names := map[string]bool{}
	services := map[string]bool{}
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.GetKey() == "service.name" {
					services[a.GetValue().GetStringValue()] = true
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					names[s.GetName()] = true
				}
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Write(out)
	}))
	defer collector.Close()
	model := newFakeModel(t, calls(call("call_1", "system_health", "{}")))
	cfg := testConfig(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, airlockBin, "worker")
	cmd.Env = append(os.Environ(), "AIRLOCK_HOME="+cfg.Home, "AIRLOCK_DATABASE_URL="+cfg.DatabaseURL, "AIRLOCK_TASK_QUEUE="+cfg.TaskQueue,
		"TEMPORAL_ADDRESS="+devServer.Address, "TEMPORAL_NAMESPACE="+devServer.Namespace,
		"AIRLOCK_OPENAI_BASE_URL="+model.URL+"/v1", "AIRLOCK_OPENAI_API_KEY=test",
		"OTEL_EXPORTER_OTLP_ENDPOINT="+collector.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_SERVICE_NAME=airlock-otlp-test", "OTEL_BSP_SCHEDULE_DELAY=100")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			t.Logf("worker stderr:\n%s", stderr.String())
		}
	}()
	c := dial(t)
	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "otlp", Principal: "user", Message: "how is the host?"})
	if res := result(t, run); outcomeList(res) != "system_health:executed" {
		t.Fatalf("outcomes = %s", outcomeList(res))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		ok := names["RunWorkflow:TurnWorkflow"] && names["RunActivity:Infer"] && services["airlock-otlp-test"]
		got := "spans " + keys(names) + "; services " + keys(services)
		mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the turn's spans did not reach the OTLP collector: %s", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func keys(m map[string]bool) string {
	var s string
	for k := range m {
		s += k + " "
	}
	return s
}
