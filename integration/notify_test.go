package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/notify"
	"github.com/airlock-dev/airlock/internal/notify/webhook"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/workflows"
)

// signedReceiver is a webhook receiver that checks every request's signature and counts
// requests and acknowledged deliveries by delivery id. While hold is set, it reads the request
// and answers nothing (the sender is killed meanwhile).
type signedReceiver struct {
	secret   []byte
	mu       sync.Mutex
	requests map[string]int
	acked    map[string]int
	notices  map[string]notify.Notice
	bad      int
	hold     chan struct{}
	held     chan string
}

func (r *signedReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	id := req.Header.Get(webhook.HeaderDelivery)
	r.mu.Lock()
	if err := webhook.Verify(r.secret, req.Header.Get(webhook.HeaderTimestamp), req.Header.Get(webhook.HeaderSignature), body, time.Minute, time.Now()); err != nil {
		r.bad++
		r.mu.Unlock()
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	r.requests[id]++
	hold := r.hold
	r.hold = nil
	r.mu.Unlock()
	if hold != nil {
		r.held <- id
		select {
		case <-hold:
		case <-req.Context().Done():
		}
		return
	}
	var n notify.Notice
	_ = json.Unmarshal(body, &n)
	r.mu.Lock()
	r.acked[id]++
	r.notices[id] = n
	r.mu.Unlock()
}

func (r *signedReceiver) counts() (map[string]int, map[string]int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	req, ack := map[string]int{}, map[string]int{}
	for k, v := range r.requests {
		req[k] = v
	}
	for k, v := range r.acked {
		ack[k] = v
	}
	return req, ack, r.bad
}

// A worker process is SIGKILLed while it sends the notice of a pending confirmation (the
// receiver has the request and has not answered). The turn still waits; a second worker sends
// the notice again under the same delivery id once the lease runs out, signed, and the
// receiver acknowledges it once. A channel that never answers delays neither the turn nor the
// other channel. The turn completes after the decision and nothing is sent twice.
func TestNoticeSurvivesWorkerSIGKILL(t *testing.T) {
	recv := &signedReceiver{secret: []byte("it-webhook-secret"), requests: map[string]int{}, acked: map[string]int{},
		notices: map[string]notify.Notice{}, hold: make(chan struct{}), held: make(chan string, 1)}
	hs := httptest.NewServer(recv)
	defer hs.Close()
	// A channel that accepts connections and never answers.
	black, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer black.Close()
	go func() {
		for {
			c, err := black.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<html><head><title>page</title></head><body><p>content</p></body></html>")
	}))
	defer target.Close()
	model := newFakeModel(t, calls(call("c1", "web_fetch", fmt.Sprintf(`{"url":"%s/a"}`, target.URL))))
	c := dial(t)
	cfg := testConfig(t)
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "hook.secret")
	if err := os.WriteFile(secretFile, recv.secret, 0o600); err != nil {
		t.Fatal(err)
	}
	notifyFile := filepath.Join(dir, "notify.yaml")
	if err := os.WriteFile(notifyFile, []byte(`base_url: http://approvers.example
channels:
  - {name: hook, type: webhook, url: `+hs.URL+`/airlock, secret: {file: `+secretFile+`}}
  - {name: stuck, type: webhook, url: http://`+black.Addr().String()+`/, secret: {file: `+secretFile+`}}
routes:
  - {capabilities: ["*"], channels: [stuck, hook]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{
		"TEMPORAL_ADDRESS=" + devServer.Address, "TEMPORAL_NAMESPACE=" + devServer.Namespace,
		"AIRLOCK_HOME=" + cfg.Home, "AIRLOCK_DATABASE_URL=" + cfg.DatabaseURL, "AIRLOCK_TASK_QUEUE=" + cfg.TaskQueue,
		"AIRLOCK_OPENAI_BASE_URL=" + model.URL + "/v1", "AIRLOCK_OPENAI_API_KEY=test", "AIRLOCK_OPENAI_MODEL=fake",
		"AIRLOCK_FETCH_ALLOW=127.0.0.0/8", "AIRLOCK_REGISTRY_LAYERS=",
		"AIRLOCK_NOTIFY_FILE=" + notifyFile, "AIRLOCK_NOTIFY_LEASE=4s",
	}
	w1 := startWorkerProcess(t, env)
	st := openStore(t, cfg)
	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "notify-crash", Message: "read a page"})
	p := waitPending(t, c, run.GetID(), map[string]bool{})
	want := notify.DeliveryID(p.ConfirmationID, notify.KindPending, "hook")
	select {
	case id := <-recv.held:
		if id != want {
			t.Fatalf("held delivery %s, want %s", id, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no notice reached the receiver\nworker log:\n%s", w1.out.String())
	}
	w1.kill(t)
	killedAt := time.Now()
	startWorkerProcess(t, env)
	eventually(t, 60*time.Second, "the notice acknowledged after the crash", func() bool {
		_, ack, _ := recv.counts()
		return ack[want] == 1
	})
	if time.Since(killedAt) < 2*time.Second {
		t.Fatalf("re-sent before the lease ran out")
	}
	decide(t, c, cfg, st, p.ConfirmationID, workflows.DecisionApprove, "alice")
	res := result(t, run)
	if got := outcomeList(res); got != "web_fetch:executed" {
		t.Fatalf("outcomes = %s", got)
	}
	// The decision is notified once too (issue 34): approved by alice, and the call ran.
	decided := notify.DeliveryID(p.ConfirmationID, notify.KindDecided, "hook")
	eventually(t, 30*time.Second, "the decided notice acknowledged", func() bool {
		_, ack, _ := recv.counts()
		return ack[decided] == 1
	})
	time.Sleep(2 * time.Second) // any duplicate would arrive now
	req, ack, bad := recv.counts()
	if bad != 0 || len(ack) != 2 || ack[want] != 1 || req[want] != 2 || req[decided] != 1 || len(req) != 2 {
		t.Fatalf("requests %v acknowledged %v bad signatures %d: want the pending notice sent twice (once cut by the crash) and acknowledged once, the decided one once", req, ack, bad)
	}
	recv.mu.Lock()
	n, dn := recv.notices[want], recv.notices[decided]
	recv.mu.Unlock()
	if n.ConfirmationID != p.ConfirmationID || n.Capability != "web.fetch@1" || n.Link == "" || n.ExpiresAt.IsZero() ||
		n.Schema != notify.SchemaV1 || n.Kind != notify.EventRequested || n.Confirmation == nil || n.Confirmation.Ref() != "web.fetch@1" {
		t.Fatalf("notice: %+v", n)
	}
	if dn.Kind != notify.EventDecided || dn.Outcome != "executed" || dn.Decision == nil || dn.Decision.Decision != "approved" ||
		dn.Confirmation == nil || dn.Confirmation.Status.State != "approved" {
		t.Fatalf("decided notice: %+v", dn)
	}
	d, err := st.GetDelivery(context.Background(), want)
	if err != nil || d.State != store.NoticeSent || d.Attempts != 2 {
		t.Fatalf("hook delivery row: %+v %v", d, err)
	}
	stuck, err := st.GetDelivery(context.Background(), notify.DeliveryID(p.ConfirmationID, notify.KindPending, "stuck"))
	if err != nil || stuck.State == store.NoticeSent {
		t.Fatalf("stuck channel row: %+v %v", stuck, err)
	}
}
