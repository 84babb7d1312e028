package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/airlock-dev/airlock/internal/codec"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/workflows"
)

// With AIRLOCK_PAYLOAD_KEYS_FILE, an `airlock worker` process and the client that starts the
// turn encrypt every payload: the turn's history, read raw from the server, holds neither the
// user's message nor the model's answer nor the fetched page, only payloads marked with the
// key id; a client with the key ring reads the result; the codec server, given the token,
// decodes a history payload back to the message, as the Temporal UI would through it.
func TestPayloadsAreEncryptedInHistory(t *testing.T) {
	t.Parallel()
	const secretMsg = "please fetch the quarterly numbers zq7-marker"
	const secretAnswer = "the numbers are fine zq8-marker"
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html><head><title>t</title></head><body><p>page zq9-marker</p></body></html>"))
	}))
	defer target.Close()
	u, _ := json.Marshal(map[string]string{"url": target.URL + "/q"})
	model := newModelServer(t, func(_ int, body []byte) (int, string) {
		if !strings.Contains(string(body), `"role":"assistant"`) {
			return http.StatusOK, calls(call("call_1", "web_fetch", string(u)))
		}
		return http.StatusOK, answer(secretAnswer)
	})
	cfg := testConfig(t)
	k, err := codec.NewKey("k-2026-11")
	if err != nil {
		t.Fatal(err)
	}
	ring := filepath.Join(cfg.Home, "payload.keys")
	if err := os.WriteFile(ring, []byte(k.Line()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	startWorkerProcess(t, []string{
		"TEMPORAL_ADDRESS=" + devServer.Address, "TEMPORAL_NAMESPACE=" + devServer.Namespace,
		"AIRLOCK_HOME=" + cfg.Home, "AIRLOCK_DATABASE_URL=" + cfg.DatabaseURL, "AIRLOCK_TASK_QUEUE=" + cfg.TaskQueue,
		"AIRLOCK_OPENAI_BASE_URL=" + model.URL + "/v1", "AIRLOCK_OPENAI_API_KEY=test", "AIRLOCK_OPENAI_MODEL=fake",
		"AIRLOCK_FETCH_ALLOW=127.0.0.0/8", "AIRLOCK_REGISTRY_LAYERS=", "AIRLOCK_APPROVER_KEY=", "AIRLOCK_APPROVER_KEY_FILE=",
		"AIRLOCK_PAYLOAD_KEYS_FILE=" + ring,
	})
	cd, err := codec.New([]codec.Key{k})
	if err != nil {
		t.Fatal(err)
	}
	o := client.Options{HostPort: devServer.Address, Namespace: devServer.Namespace, Logger: quietLogger(), DataConverter: codec.DataConverter(cd), Interceptors: signing()}
	config.TuneForLoopback(&o)
	c, err := client.Dial(o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw := dial(t) // no key ring: sees what the server stores
	st := openStore(t, cfg)
	eventually(t, 60*time.Second, "the worker to poll", func() bool {
		_, err := os.Stat(cfg.KeyFile())
		return err == nil
	})
	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "codec", Principal: "user", Message: secretMsg})
	p := waitPending(t, c, run.GetID(), map[string]bool{})
	decide(t, c, cfg, st, p.ConfirmationID, workflows.DecisionApprove, "alice")
	res := result(t, run)
	if res.Prose != secretAnswer {
		t.Fatalf("result through the key ring = %q", res.Prose)
	}

	var all bytes.Buffer
	var first *commonpb.Payload
	it := raw.GetWorkflowHistory(context.Background(), run.GetID(), "", false, 0)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := protojson.Marshal(e)
		all.Write(b)
		if a := e.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			first = a.GetInput().GetPayloads()[0]
		}
	}
	for _, m := range []string{"zq7-marker", "zq8-marker", "zq9-marker"} {
		if strings.Contains(all.String(), m) {
			t.Errorf("history holds plaintext %q", m)
		}
	}
	if first == nil || string(first.GetMetadata()[codec.MetadataKeyID]) != "k-2026-11" {
		t.Fatalf("workflow input payload = %v, want encrypted with k-2026-11", first)
	}

	const token = "codec-token-0123456789"
	srv := httptest.NewServer(codec.Handler(cd, token, []string{"http://127.0.0.1:18080"}))
	defer srv.Close()
	body, _ := protojson.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{first}})
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/decode", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out commonpb.Payloads
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	if err := protojson.Unmarshal(buf.Bytes(), &out); err != nil || len(out.Payloads) != 1 || !strings.Contains(string(out.Payloads[0].Data), "zq7-marker") {
		t.Fatalf("codec server decode: %d %s (%v)", resp.StatusCode, buf.String(), err)
	}
}
