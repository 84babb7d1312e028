package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/stack"
	"github.com/airlock-dev/airlock/workflows"
)

// An `airlock worker` process with AIRLOCK_METRICS_ADDR serves /healthz and /metrics. After one
// real turn (system_health automatic, web_fetch confirmed and approved, one call with broken
// JSON arguments) the scrape shows Airlock's counters moved by exactly that turn (two
// executed, one parse failure by reason, one approval and its time to decision, no
// outcome_unknown) and the Temporal SDK's own metrics; with AIRLOCK_LOG_FORMAT=json every log
// line is a JSON object.
func TestWorkerMetricsAfterATurn(t *testing.T) {
	t.Parallel()
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><head><title>t</title></head><body><p>ok</p></body></html>")
	}))
	defer target.Close()
	u, _ := json.Marshal(map[string]string{"url": target.URL + "/page"})
	model := newFakeModel(t, calls(call("call_1", "system_health", "{}"), call("call_2", "web_fetch", string(u)),
		call("call_3", "system_health", `{"broken":`)))
	cfg := testConfig(t)
	port, err := stack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	w := startWorkerProcess(t, []string{
		"TEMPORAL_ADDRESS=" + devServer.Address, "TEMPORAL_NAMESPACE=" + devServer.Namespace,
		"AIRLOCK_HOME=" + cfg.Home, "AIRLOCK_DATABASE_URL=" + cfg.DatabaseURL, "AIRLOCK_TASK_QUEUE=" + cfg.TaskQueue,
		"AIRLOCK_OPENAI_BASE_URL=" + model.URL + "/v1", "AIRLOCK_OPENAI_API_KEY=test", "AIRLOCK_OPENAI_MODEL=fake",
		"AIRLOCK_FETCH_ALLOW=127.0.0.0/8", "AIRLOCK_REGISTRY_LAYERS=", "AIRLOCK_APPROVER_KEY=", "AIRLOCK_APPROVER_KEY_FILE=",
		"AIRLOCK_METRICS_ADDR=" + addr, "AIRLOCK_LOG_FORMAT=json", "AIRLOCK_LOG_LEVEL=info",
	})
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	eventually(t, 60*time.Second, "the worker's /healthz", func() bool { code, _ := get("/healthz"); return code == http.StatusOK })
	_, before := get("/metrics")
	if v := sample(before, `airlock_proposals_total{outcome="executed",reason=""}`); v != 0 {
		t.Fatalf("executed before any turn = %v", v)
	}

	c := dial(t)
	st := openStore(t, cfg)
	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "metrics", Principal: "user", Message: "check health and fetch the page"})
	p := waitPending(t, c, run.GetID(), map[string]bool{})
	decide(t, c, cfg, st, p.ConfirmationID, workflows.DecisionApprove, "alice")
	res := result(t, run)
	if got := outcomeList(res); !strings.Contains(got, "system_health:executed") || !strings.Contains(got, "web_fetch:executed") {
		t.Fatalf("outcomes = %s", got)
	}

	var after string
	eventually(t, 30*time.Second, "the counters to move", func() bool {
		_, after = get("/metrics")
		return sample(after, `airlock_proposals_total{outcome="executed",reason=""}`) == 2
	})
	parse := regexp.MustCompile(`(?m)^airlock_parse_failures_total\{reason="([a-z_]+)"\} 1$`).FindStringSubmatch(after)
	if parse == nil {
		t.Errorf("no parse failure counted:\n%s", grep(after, "airlock_"))
	} else if v := sample(after, `airlock_proposals_total{outcome="parse_failed",reason="`+parse[1]+`"}`); v != 1 {
		t.Errorf("parse_failed proposals (reason %s) = %v, want 1", parse[1], v)
	}
	for name, want := range map[string]float64{
		`airlock_decisions_total{decision="approved"}`: 1,
		`airlock_time_to_decision_seconds_count`:       1,
		`airlock_effects_outcome_unknown_total`:        0,
		`airlock_confirmations_pending`:                0,
	} {
		if got := sample(after, name); got != want {
			t.Errorf("%s = %v, want %v\n%s", name, got, want, grep(after, "airlock_"))
		}
	}
	if !regexp.MustCompile(`(?m)^temporal_workflow_task_queue_poll_succeed(_total)?\{.*workflow_type="TurnWorkflow".*\} [1-9]`).MatchString(after) {
		t.Errorf("no SDK metric temporal_workflow_task_queue_poll_succeed for TurnWorkflow in the scrape:\n%s", grep(after, "temporal_workflow"))
	}

	w.cmd.Process.Signal(syscall.SIGTERM)
	w.cmd.Wait()
	sc := bufio.NewScanner(strings.NewReader(w.out.String()))
	jsonLines := 0
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "{") {
			continue // the worker's own startup lines for humans
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("log line is not JSON: %s", line)
		}
		jsonLines++
	}
	if jsonLines == 0 {
		t.Errorf("no JSON log line from the worker:\n%s", w.out.String())
	}
}

// sample returns the value of the sample line `name value` in a Prometheus text scrape, or -1.
func sample(scrape, name string) float64 {
	for _, line := range strings.Split(scrape, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	if strings.Contains(name, "{") {
		return 0 // a labelled counter not yet incremented has no line
	}
	return -1
}

func grep(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
