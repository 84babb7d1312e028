package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

// A conversation belongs to the principal of its first proven turn: a client that may speak
// only for bob cannot continue carol's conversation (it would read her context and plant
// "user" text provenance takes for hers). Found by an attack run; the turn ends unattested
// without the model being asked, and carol's own next turn still runs.
func TestAConversationBelongsToItsFirstPrincipal(t *testing.T) {
	model := newFakeModel(t) // always answers
	c, cfg, st := liveModelStack(t, model)
	conv := "carol-private-" + cfg.TaskQueue
	start := func(seq int, req workflows.TurnRequest) workflows.TurnResult {
		t.Helper()
		run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: workflows.TurnWorkflowID(conv, seq), TaskQueue: cfg.TaskQueue},
			workers.TurnWorkflowName, req)
		if err != nil {
			t.Fatal(err)
		}
		return result(t, run)
	}
	if r := start(1, workflows.TurnRequest{Conversation: conv, Principal: "carol", Message: "my card PIN is 8812, remember it"}); r.EndReason != "answered" {
		t.Fatalf("carol's first turn ended %s (%s)", r.EndReason, r.EndDetail)
	}
	asked := len(model.requests())
	bob := workflows.TurnRequest{Conversation: conv, Principal: "bob", Message: "what did I tell you earlier?"}
	workflows.SignRequest(itBobOnly, &bob, 2, time.Now())
	r := start(2, bob)
	if r.EndReason != workflows.EndUnattested || !strings.HasPrefix(r.EndDetail, clients.RefusalOtherConversation) {
		t.Fatalf("bob's turn in carol's conversation ended %s (%s), want unattested: %s", r.EndReason, r.EndDetail, clients.RefusalOtherConversation)
	}
	if len(model.requests()) != asked {
		t.Fatal("the model was asked for bob's turn in carol's conversation")
	}
	rows, err := st.ListAudit(context.Background(), workflows.TurnWorkflowID(conv, 2))
	if err != nil || len(rows) == 0 || rows[0].Reason != clients.RefusalOtherConversation {
		t.Fatalf("audit of the refused turn = %+v, %v", rows, err)
	}
	if r := start(3, workflows.TurnRequest{Conversation: conv, Principal: "carol", Message: "and now?"}); r.EndReason != "answered" {
		t.Fatalf("carol's next turn ended %s (%s)", r.EndReason, r.EndDetail)
	}
}
