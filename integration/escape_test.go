package integration

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/airlock-dev/airlock/client"
)

// The JSON payloads Airlock writes to Temporal history carry hidden characters as \u escapes
// (issue 19, item 4): a turn started by the public client package, run by a real `airlock
// worker` process, whose user message and model answer hold a zero-width space and a
// right-to-left override; no payload in the raw history holds either character raw, the
// escapes are there, and the result decodes to the very same text.
func TestHistoryPayloadsCarryHiddenCharactersEscaped(t *testing.T) {
	const hidden = "total\u200b due \u202e05.9999"
	model := newFakeModel(t, calls(call("call_1", "system_health", "{}")), answer("the answer: "+hidden))
	cfg := testConfig(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, airlockBin, "worker")
	cmd.Env = append(os.Environ(), "AIRLOCK_HOME="+cfg.Home, "AIRLOCK_DATABASE_URL="+cfg.DatabaseURL, "AIRLOCK_TASK_QUEUE="+cfg.TaskQueue,
		"TEMPORAL_ADDRESS="+devServer.Address, "TEMPORAL_NAMESPACE="+devServer.Namespace,
		"AIRLOCK_OPENAI_BASE_URL="+model.URL+"/v1", "AIRLOCK_OPENAI_API_KEY=test")
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
	var cl *client.Client
	var err error
	deadline := time.Now().Add(60 * time.Second)
	for cl == nil {
		// The store exists once the worker created it.
		if cl, err = client.Dial(ctx, client.Options{HostPort: devServer.Address, Namespace: devServer.Namespace, TaskQueue: cfg.TaskQueue, DatabaseURL: cfg.StoreURL(), ClientCredentialFile: itStarterFile}); err != nil {
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	defer cl.Close()
	turn, err := cl.StartTurn(ctx, client.TurnRequest{Conversation: "escape-" + cfg.TaskQueue, Principal: "user", Message: "what is " + hidden + "?"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := turn.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Prose, hidden) {
		t.Fatalf("the result must decode to the same text: %q", res.Prose)
	}
	it := dial(t).GetWorkflowHistory(ctx, turn.ID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var all strings.Builder
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		b, err := ev.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	h := all.String()
	for _, raw := range []string{"\u200b", "\u202e"} {
		if strings.Contains(h, raw) {
			t.Errorf("the history holds %q raw", raw)
		}
	}
	if !strings.Contains(h, `total\u200b due \u202e05.9999`) {
		t.Errorf("the history lacks the escaped text")
	}
}
