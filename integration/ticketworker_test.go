package integration

// The extension API end to end (issue 19, item 1): examples/ticketworker, a module of its own
// that imports only Airlock's public packages, is built and run as a real process against a
// ticket server written here, a real Temporal dev server and PostgreSQL; a scripted model
// reads a ticket (automatic) and opens one (held for a human other than the requester), and
// a real headless Chromium approves it on the real approver page. The ticket is created once.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/approvers"
)

// ticketServer is the team's ticket system: GET /tickets/{id}, POST /tickets (deduplicated by
// Idempotency-Key, as a careful system would be).
type ticketServer struct {
	*httptest.Server
	mu      sync.Mutex
	reads   []string
	creates []map[string]any
	keys    []string
}

func newTicketServer(t *testing.T) *ticketServer {
	ts := &ticketServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /tickets/{id}", func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		ts.reads = append(ts.reads, r.PathValue("id"))
		ts.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%s,"title":"Printer on floor 3 jams","status":"open","priority":"normal"}`, r.PathValue("id"))
	})
	mux.HandleFunc("POST /tickets", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		ts.mu.Lock()
		ts.creates = append(ts.creates, body)
		ts.keys = append(ts.keys, r.Header.Get("Idempotency-Key"))
		n := len(ts.creates)
		ts.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d,"status":"open"}`, 100+n)
	})
	ts.Server = httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

func (ts *ticketServer) counts() (reads, creates int) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.reads), len(ts.creates)
}

// buildTicketWorker builds examples/ticketworker (its own module; the replace directive points
// at this repository) into dir.
func buildTicketWorker(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "ticketworker")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(repoRoot, "examples", "ticketworker")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build examples/ticketworker (its go.mod/go.sum must be tidy: cd examples/ticketworker && go mod tidy): %v\n%s", err, out)
	}
	return bin
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestTicketWorkerExample(t *testing.T) {
	browserPath(t)
	home := t.TempDir()
	tickets := newTicketServer(t)
	const createArgs = `{"title":"Printer on floor 3 jams again","body":"Third time this week.","priority":"high"}`
	model := newFakeModel(t, calls(call("c1", "get_ticket", `{"id":7}`), call("c2", "create_ticket", createArgs)))
	approversFile := filepath.Join(home, "approvers.json")
	for _, n := range []string{"alice", "bob"} {
		h, err := approvers.HashPassword(webPassword)
		if err != nil {
			t.Fatal(err)
		}
		if err := approvers.Add(approversFile, approvers.Approver{Name: n, PasswordBcrypt: h}); err != nil {
			t.Fatal(err)
		}
	}
	dbURL, queue, metrics := freshDB(t), taskQueue(t), freePort(t)
	env := append(os.Environ(), "AIRLOCK_HOME="+home, "AIRLOCK_DATABASE_URL="+dbURL, "AIRLOCK_TASK_QUEUE="+queue,
		"AIRLOCK_APPROVERS="+approversFile, "TEMPORAL_ADDRESS="+devServer.Address, "TEMPORAL_NAMESPACE="+devServer.Namespace,
		"AIRLOCK_TEMPORAL_UI="+devServer.UIAddress)
	bin := buildTicketWorker(t, t.TempDir())

	// check: the layer with its policy loads under every gate before anything runs.
	check := exec.Command(bin, "check")
	check.Env = append(env, "TICKETS_URL="+tickets.URL, "AIRLOCK_REGISTRY_LAYERS="+filepath.Join(repoRoot, "examples", "ticketworker", "registry", "tickets.v1.json"))
	if out, err := check.CombinedOutput(); err != nil || !strings.Contains(string(out), "tickets.create@1 (tool create_ticket): side effect external-write, network external, destination system team ticket system [title body priority]") {
		t.Fatalf("ticketworker check: %v\n%s", err, out)
	}

	ctx, cancel := context.WithCancel(context.Background())
	worker := exec.CommandContext(ctx, bin)
	worker.Env = append(check.Env, "AIRLOCK_METRICS_ADDR="+metrics, "AIRLOCK_OPENAI_BASE_URL="+model.URL+"/v1", "AIRLOCK_OPENAI_API_KEY=test")
	var stderr syncBuffer
	worker.Stderr = &stderr
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		worker.Wait()
		if t.Failed() {
			t.Logf("ticketworker stderr:\n%s", stderr.String())
		}
	})
	// /healthz answers once Temporal and the store do; /metrics carries the SDK's metrics.
	eventually(t, 90*time.Second, "the ticket worker's /healthz", func() bool {
		resp, err := http.Get("http://" + metrics + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "temporal_") {
		t.Fatalf("/metrics lacks the SDK's metrics:\n%.500s", body)
	}

	web := &webEnv{durEnv: &durEnv{t: t, home: home, dbURL: dbURL, queue: queue}, approvers: approversFile}
	web.url = web.startWeb()

	c := dial(t)
	cl, err := client.New(ctx, c, client.Options{TaskQueue: queue, DatabaseURL: dbURL, ClientCredentialFile: itStarterFile})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	conv := "tickets-" + queue
	turn, err := cl.StartTurn(ctx, client.TurnRequest{Conversation: conv, Principal: "alice", Message: "the printer jams again; check ticket 7 and open a new one"})
	if err != nil {
		t.Fatal(err)
	}
	var p client.PendingConfirmation
	eventually(t, 60*time.Second, "create_ticket pending", func() bool {
		ps, err := turn.Pending(ctx)
		if err == nil && len(ps) == 1 {
			p = ps[0]
		}
		return p.ConfirmationID != ""
	})
	// Only the create waits for a human (the read is automatic); the batch runs, in call
	// order, once it is decided.
	if ps, _ := turn.Pending(ctx); len(ps) != 1 || p.ToolName != "create_ticket" {
		t.Fatalf("pending %+v: only create_ticket needs a confirmation", ps)
	}
	if reads, creates := tickets.counts(); reads != 0 || creates != 0 {
		t.Fatalf("before approval: %d reads, %d creates", reads, creates)
	}

	// Every surface shows where the call goes and what it sends, as the registry declares it:
	// the client package's pending confirmation, and the page's card.
	if d := p.Disclosure; d == nil || d.Destination.Kind != "system" || d.Destination.Name != "team ticket system" ||
		d.SideEffect != "external-write" || len(d.Leaving) != 3 || d.Leaving[0].Field != "title" || !strings.HasPrefix(d.Description, "Open a new ticket") {
		t.Fatalf("disclosure %+v", p.Disclosure)
	}
	b := newTab(t)
	b.signIn(web.url, "alice")
	b.waitCard(web.url, p.ConfirmationID)
	cardSel := card(p.ConfirmationID)
	dest := b.text(cardSel + ` .destination`)
	for _, want := range []string{"Open a new ticket", "external-write", "external", "team ticket system", "title", "Printer on floor 3 jams again", "priority", "high"} {
		if !strings.Contains(dest, want) {
			t.Errorf("the card's destination lacks %q:\n%s", want, dest)
		}
	}
	b.do("alice approves her own request", chromedp.Click(css(cardSel+` button.approve`)), chromedp.WaitVisible(css(`#answer`)))
	if got := b.text(`#answer`); !strings.Contains(got, "approver_is_requester") {
		t.Fatalf("the requester's approval: %q", got)
	}
	if _, creates := tickets.counts(); creates != 0 {
		t.Fatal("the requester's own approval created the ticket")
	}
	bob := newTab(t)
	bob.signIn(web.url, "bob")
	bob.waitCard(web.url, p.ConfirmationID)
	bob.do("bob approves", chromedp.Click(css(cardSel+` button.approve`)), chromedp.WaitVisible(css(`#answer`)))
	if got := bob.text(`#answer`); !strings.Contains(got, "Approved "+p.ConfirmationID+" as bob") {
		t.Fatalf("bob's approval: %q", got)
	}
	res, err := turn.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Outcomes) != 2 || res.Outcomes[0].Outcome != client.OutcomeExecuted || res.Outcomes[0].Approver != "" || res.Outcomes[0].ConfirmationID != "" ||
		res.Outcomes[1].Outcome != client.OutcomeExecuted || res.Outcomes[1].Approver != "bob" {
		t.Fatalf("outcomes %s", outcomeList(res))
	}
	reads, creates := tickets.counts()
	tickets.mu.Lock()
	defer tickets.mu.Unlock()
	if reads != 1 || creates != 1 || tickets.creates[0]["title"] != "Printer on floor 3 jams again" || !strings.HasPrefix(tickets.keys[0], "airlock-") {
		t.Fatalf("ticket system saw %d reads and %d creates (%v, keys %v): the ticket must be created exactly once", reads, creates, tickets.creates, tickets.keys)
	}
	if len(res.Results) != 2 || !strings.Contains(string(res.Results[1].Data), `"id":101`) || res.Results[1].SourceURL != tickets.URL+"/tickets" {
		t.Fatalf("results %+v", res.Results)
	}
}
