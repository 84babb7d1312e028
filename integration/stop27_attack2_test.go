package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/proposals"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workflows"
)

// Hostile proposal-tool names: a case variant and a look-alike (fullwidth low line) of an
// offered proposal tool and a registered proposal tool the round did not offer are never
// proposals: the round stores no snapshot, captures nothing, asks no human, and each is
// refused at resolve. A turn asked again with a stored snapshot's offer that the model then
// answers with a capability call goes on with that answer alone: the discarded first answer
// (a proposal call) leaves nothing in the conversation, and the confirmation is the second
// answer's call.
func TestStop27HostileProposalNamesAndSecondAskCapability(t *testing.T) {
	target := statusPage(t)
	model := newModelServer(t, func(n int, _ []byte) (int, string) {
		switch n {
		case 0:
			return http.StatusOK, calls(call("c1", "Propose_Focus", `{}`), call("c2", "propose\uff3ffocus", `{}`),
				call("c3", "submit_correction", correctionArgs("latest", "x")))
		case 1:
			return http.StatusOK, answer("Done.")
		case 2: // turn 2, first ask (its own offer): discarded
			return http.StatusOK, calls(call("p1", "submit_correction", correctionArgs("latest", "DISCARDED-ANSWER")))
		case 3: // turn 2, second ask (the stored offer): a capability call
			return http.StatusOK, calls(call("w1", "web_fetch", fmt.Sprintf(`{"url":"%s/a"}`, target.URL)))
		}
		return http.StatusOK, answer("Noted.")
	})
	c, cfg, st := liveModelStack(t, model)
	ctx := context.Background()
	conv := "hostilenames-" + cfg.TaskQueue
	wf1, wf2 := workflows.TurnWorkflowID(conv, 1), workflows.TurnWorkflowID(conv, 2)
	r1 := result(t, startTurnSeq(t, c, cfg, conv, 1, "What is the capital of Australia?"))
	if !strings.Contains(model.requests()[0], `"propose_focus"`) || strings.Contains(model.requests()[0], `"submit_correction"`) {
		t.Fatalf("turn 1's offer is not propose_focus alone, so the test proves nothing: %s", model.requests()[0])
	}
	// The look-alike never reaches resolve: the parser refuses a name that is not a tool name.
	want := [][2]string{{"rejected", registry.RefusalUnregistered}, {"parse_failed", "invalid_name"}, {"rejected", registry.RefusalNotDispatchable}}
	if r1.EndReason != "answered" || len(r1.Outcomes) != len(want) {
		t.Fatalf("turn 1: %s %s", r1.EndReason, outcomeList(r1))
	}
	for i, o := range r1.Outcomes {
		if string(o.Outcome) != want[i][0] || string(o.Reason) != want[i][1] {
			t.Fatalf("turn 1 outcome %d: %s", i, outcomeList(r1))
		}
	}
	if _, err := st.GetSnapshot(ctx, proposals.SnapshotID(wf1, 1)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a round naming no offered proposal tool stored its snapshot (err %v)", err)
	}
	if rows, err := st.ListProposals(ctx, wf1); err != nil || len(rows) != 0 {
		t.Fatalf("proposals of turn 1: %+v %v", rows, err)
	}
	if ids, err := st.PendingIDs(ctx, time.Now()); err != nil || len(ids) != 0 {
		t.Fatalf("confirmations issued for hostile proposal names: %v %v", ids, err)
	}

	// What an earlier attempt of turn 2's round 1 stored: a snapshot offering propose_focus only.
	earlier := proposals.Snapshot{ID: proposals.SnapshotID(wf2, 1), WorkflowID: wf2, Round: 1, Conversation: conv,
		InputID: proposals.InputID(wf2), Targets: []proposals.CorrectionTarget{}, Evidence: []string{proposals.InputID(wf2)},
		Offered: []string{registry.ProposalFocusDeclaration}}
	if _, err := st.PutSnapshot(ctx, earlier.ID, wf2, 1, earlier.Encode()); err != nil {
		t.Fatal(err)
	}
	run := startTurnSeq(t, c, cfg, conv, 2, "That was wrong, correct your last reply.")
	p := waitPending(t, c, run.GetID(), map[string]bool{})
	defer c.TerminateWorkflow(ctx, run.GetID(), "", "test done")
	reqs := model.requests()
	// Turn 1's refused call keeps submit_correction in the context: the offer is the difference.
	if len(reqs) != 4 || strings.Count(reqs[3], `"submit_correction"`) >= strings.Count(reqs[2], `"submit_correction"`) {
		t.Fatalf("turn 2 was not asked again with the stored offer (%d requests)", len(reqs)-2)
	}
	if strings.Contains(reqs[3], "DISCARDED-ANSWER") {
		t.Fatalf("the discarded first answer reached the second ask: %s", reqs[3])
	}
	row, err := st.GetConfirmation(ctx, p.ConfirmationID)
	if err != nil || row.WorkflowID != wf2 || !strings.HasPrefix(row.CapabilityID, "web") {
		t.Fatalf("turn 2's confirmation = %+v, %v: want the second answer's web_fetch", row, err)
	}
	if ids, err := st.PendingIDs(ctx, time.Now()); err != nil || len(ids) != 1 || ids[0] != p.ConfirmationID {
		t.Fatalf("pending = %v, %v: want only %s", ids, err, p.ConfirmationID)
	}
	entries, err := st.LoadContext(ctx, conv, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(string(e.Payload), "DISCARDED-ANSWER") {
			t.Fatalf("the discarded first answer reached the conversation: %s %s", e.Key, e.Payload)
		}
	}
	if rows, err := st.ListProposals(ctx, wf2); err != nil || len(rows) != 0 {
		t.Fatalf("proposals of turn 2: %+v %v", rows, err)
	}
	if got, err := st.GetSnapshot(ctx, earlier.ID); err != nil || string(got) != string(earlier.Encode()) {
		t.Fatalf("the stored snapshot changed: %s %v", got, err)
	}
}
