package integration

// The chaos worker: the test binary re-executed with AIRLOCK_CHAOS_WORKER=1 (TestMain checks it
// before anything else) runs a real Airlock worker in its own OS process, so the harness can
// SIGKILL it at any moment. It is built exactly as production builds one (workers.New, client
// options from config.TemporalOptions) and differs only in its registry: the chaos capabilities
// below instead of the base registry, and an activity interceptor that can kill the process
// between Execute and Record.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/mcp"
	"github.com/airlock-dev/airlock/internal/receipts"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/token"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workers"
)

// Environment of a chaos worker process.
const (
	chaosWorkerEnv  = "AIRLOCK_CHAOS_WORKER"  // "1": run as a chaos worker instead of tests
	chaosDBEnv      = "AIRLOCK_CHAOS_DB"      // store URL
	chaosQueueEnv   = "AIRLOCK_CHAOS_QUEUE"   // task queue
	chaosModelEnv   = "AIRLOCK_CHAOS_MODEL"   // base URL of the scripted model (OpenAI wire format)
	chaosEffectsEnv = "AIRLOCK_CHAOS_EFFECTS" // base URL of the effect server
	chaosKeyEnv     = "AIRLOCK_CHAOS_KEYFILE" // approver key file
	chaosMarksEnv   = "AIRLOCK_CHAOS_MARKS"   // directory of kill marks (see recordKillMark)
	// chaosMCPEnv is the URL of the harness's MCP server and chaosMCPLayerEnv the registry
	// layer file that pins its tool (imported by the harness): the worker bridges it.
	chaosMCPEnv      = "AIRLOCK_CHAOS_MCP"
	chaosMCPLayerEnv = "AIRLOCK_CHAOS_MCP_LAYER"
)

// chaosMCPServer is the servers-file name of the harness's MCP server.
const chaosMCPServer = "chaosledger"

// chaosMCPConfig is how the worker reaches the harness's MCP server: verify/max-age 1 h, so a
// call after a restart meets the forgotten session on its own POST (the hardest case of issue
// 38 item 1: before it, an approved write was reported outcome_unknown although it never ran).
func chaosMCPConfig(url string) mcp.ServerConfig {
	return mcp.ServerConfig{Name: chaosMCPServer, URL: url, Refresh: "1h", VerifyMaxAge: "1h", ConnectTimeout: "5s"}
}

// The chaos registry: chaos_read is local and read-only (automatic, at-least-once, a local
// activity); chaos_write is an external write (always confirmed, through the execution
// ledger). The 10 s timeout gives Execute a 15 s start-to-close timeout today.
var chaosRegistry = `{"schema/v":"capability-registry.v1","revision":"chaos-test.1","entries":[` + strings.Join([]string{
	durEntry("chaos.read", "chaos_read", "none", "local", "Read the local notes on a topic."),
	durEntry("chaos.write", "chaos_write", "external-write", "external", "Write an entry to the external ledger."),
}, ",") + `]}`

type chaosReadArgs struct {
	Topic string `json:"topic" validate:"required"`
}

type chaosWriteArgs struct {
	Entry string `json:"entry" validate:"required"`
}

// chaosImpls binds the chaos capabilities. chaos_write POSTs to the effect server, which logs
// and fsyncs the effect before it answers: the effect is observable whatever happens to this
// process afterwards.
func chaosImpls(effects string) []registry.Implementation {
	hc := &http.Client{Timeout: 30 * time.Second}
	return []registry.Implementation{
		registry.Typed("chaos.read", 1, func(_ context.Context, a *chaosReadArgs, _ registry.Invocation) (registry.Output, error) {
			b, _ := json.Marshal(map[string]any{"topic": a.Topic, "notes": []string{"nothing new on " + a.Topic}})
			return registry.Output{Data: b}, nil
		}),
		registry.Typed("chaos.write", 1, func(ctx context.Context, a *chaosWriteArgs, inv registry.Invocation) (registry.Output, error) {
			l := effectLine{WorkflowID: inv.WorkflowID, Seq: inv.Seq, Entry: a.Entry}
			if activity.IsActivity(ctx) {
				l.Attempt = activity.GetInfo(ctx).Attempt
			}
			b, _ := json.Marshal(l)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, effects+"/effect", bytes.NewReader(b))
			if err != nil {
				return registry.Output{}, err
			}
			resp, err := hc.Do(req)
			if err != nil {
				return registry.Output{}, fmt.Errorf("effect server: %w", err)
			}
			defer resp.Body.Close()
			var out json.RawMessage
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
				return registry.Output{}, fmt.Errorf("effect server: HTTP %d %v", resp.StatusCode, err)
			}
			return registry.Output{Data: out}, nil
		}),
	}
}

// chaosWorkerMain runs the worker until SIGTERM (or SIGKILL, the point of it). Its exit code
// is 1 on a setup error, which the harness reports with the tail of the worker's log.
func chaosWorkerMain() int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "chaos worker: %v\n", err)
		return 1
	}
	ctx := context.Background()
	key, err := token.LoadOrCreateKey(os.Getenv(chaosKeyEnv))
	if err != nil {
		return fail(err)
	}
	st, err := store.Open(ctx, os.Getenv(chaosDBEnv))
	if err != nil {
		return fail(err)
	}
	defer st.Close()
	// The receipts log key beside the approver key, as a worker keeps it in its home.
	rkey, err := receipts.LoadOrCreateKey(filepath.Dir(os.Getenv(chaosKeyEnv)), "airlock.test/chaos")
	if err != nil {
		return fail(err)
	}
	st.UseReceiptKey(rkey)
	sources := []registry.Source{{Name: "chaos", Data: []byte(chaosRegistry)}}
	impls := chaosImpls(os.Getenv(chaosEffectsEnv))
	if url := os.Getenv(chaosMCPEnv); url != "" {
		layer, err := os.ReadFile(os.Getenv(chaosMCPLayerEnv))
		if err != nil {
			return fail(err)
		}
		src := registry.Source{Name: "chaos-mcp", Data: layer}
		entries, err := registry.Entries(src)
		if err != nil {
			return fail(err)
		}
		b := mcp.New(slog.New(slog.NewTextHandler(os.Stderr, nil)))
		defer b.Close()
		b.Configure(&mcp.Servers{SchemaV: mcp.ServersSchemaVersion, Servers: []mcp.ServerConfig{chaosMCPConfig(url)}})
		more, err := b.Implementations(entries)
		if err != nil {
			return fail(err)
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		b.WaitSettled(sctx)
		cancel()
		sources, impls = append(sources, src), append(impls, more...)
	}
	reg, err := registry.Load(registry.WithStructuralPolicy(sources...), impls)
	if err != nil {
		return fail(err)
	}
	live, err := inference.NewOpenAI(inference.OpenAIConfig{BaseURL: os.Getenv(chaosModelEnv) + "/v1", APIKey: "chaos", Model: "fake"})
	if err != nil {
		return fail(err)
	}
	o, err := config.TemporalOptions() // TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE from the harness
	if err != nil {
		return fail(err)
	}
	// The SDK logs (warn and up, AIRLOCK_LOG_LEVEL) go to this worker's log file.
	o.Interceptors = append(o.Interceptors, &recordKiller{marks: os.Getenv(chaosMarksEnv)})
	c, err := client.Dial(o)
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	w := workers.New(c, &activities.Activities{Registry: reg, Store: st, Live: live, ApproverKey: key, Approvers: testApprovers(), Clients: testClients()}, os.Getenv(chaosQueueEnv))
	if err := w.Start(); err != nil {
		return fail(err)
	}
	fmt.Fprintf(os.Stderr, "chaos worker %d polling %s\n", os.Getpid(), os.Getenv(chaosQueueEnv))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	w.Stop()
	return 0
}

// recordKillMark is the file whose existence tells a chaos worker to SIGKILL itself when the
// Record activity of an executed chaos_write of that workflow starts: the moment after Execute
// returned (its result is in history) and before stage 6 wrote the audit row and the context.
// The worker removes the mark first, so exactly one process dies there, whichever worker gets
// the task.
func recordKillMark(dir, workflowID string) string {
	return filepath.Join(dir, "record-"+strings.NewReplacer("/", "_", ":", "_").Replace(workflowID))
}

// recordKiller is a worker interceptor (registered through the client options, which the SDK
// applies to workers too) that implements the between-Execute-and-Record kill point.
type recordKiller struct {
	interceptor.WorkerInterceptorBase
	interceptor.ClientInterceptorBase
	marks string
}

func (k *recordKiller) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &recordKillerInbound{marks: k.marks}
	i.Next = next
	return i
}

type recordKillerInbound struct {
	interceptor.ActivityInboundInterceptorBase
	marks string
}

func (i *recordKillerInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	if i.marks != "" && activity.GetInfo(ctx).ActivityType.Name == "Record" && len(in.Args) == 1 {
		if r, ok := in.Args[0].(activities.RecordInput); ok && r.Audit != nil && r.Audit.CapabilityID == "chaos.write" &&
			r.Audit.Kind == string(activities.OutcomeExecuted) {
			if os.Remove(recordKillMark(i.marks, r.Audit.WorkflowID)) == nil {
				fmt.Fprintf(os.Stderr, "chaos worker %d: SIGKILL before Record of %s #%d\n", os.Getpid(), r.Audit.WorkflowID, r.Audit.Seq)
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // never returns
			}
		}
	}
	return i.Next.ExecuteActivity(ctx, in)
}
