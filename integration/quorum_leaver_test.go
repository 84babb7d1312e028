package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workflows"
)

// The attack of issue 33, re-tried end to end (real PostgreSQL, a real Temporal dev server, the
// airlock binary): send_money needs 2 approvals from payments. erin approves with `airlock
// approve` (1 of 2), the administrator runs `airlock approvers remove erin`, carol approves:
// the payment does not run (carol's approval is 1 of 2 again; the audit says erin's was dropped
// because she is no longer an approver). dave's approval completes the quorum and it runs once.
func TestQuorumDropsTheApprovalOfARemovedApprover(t *testing.T) {
	e := &webEnv{durEnv: newDurEnv(t)}
	src := registry.Source{Name: "web-test", Data: []byte(webRegistry)}
	base := registry.StructuralPolicy("quorum policy", "quorum.1", func(en registry.Entry) bool { return en.ID == "test.send-money" }, src)
	var doc registry.PolicyDocument
	if err := json.Unmarshal(base.Data, &doc); err != nil {
		t.Fatal(err)
	}
	for i := range doc.Capabilities {
		if doc.Capabilities[i].ID == "test.send-money" {
			doc.Capabilities[i].ApproverGroups, doc.Capabilities[i].Quorum = []string{"payments"}, 2
		}
	}
	data, _ := json.Marshal(doc)
	reg, err := registry.Load([]registry.Source{src, {Name: base.Name, Data: data}}, []registry.Implementation{
		effect[urlArgs](e.durEnv, "test.web-fetch", "web_fetch", `{"body":"<html>page</html>"}`),
		effect[sendMoneyArgs](e.durEnv, "test.send-money", "send_money", `{"sent":true}`),
		effect[sendEmailArgs](e.durEnv, "test.send-email", "send_email", `{"sent":true}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.reg = reg
	e.approvers = filepath.Join(e.home, "approvers.json")
	creds := map[string]string{}
	for _, n := range []string{"erin", "carol", "dave"} {
		cred, err := approvers.NewCredential("approver:" + n)
		if err != nil {
			t.Fatal(err)
		}
		creds[n] = filepath.Join(t.TempDir(), n+".json")
		if err := approvers.SaveCredential(creds[n], cred); err != nil {
			t.Fatal(err)
		}
		if err := approvers.Add(e.approvers, approvers.Approver{Name: n, PublicKey: cred.Public(), Groups: []string{"payments"}}); err != nil {
			t.Fatal(err)
		}
	}
	e.model = newRoutedModel(t, map[string][]string{"pay": {calls(call("m1", "send_money", `{"recipient":"GB29NWBK60161331926819","amount":900,"subject":"rent","date":"2026-12-05"}`))}})
	e.startWebWorker()
	run := e.startTurn("leaver", workflows.TurnRequest{Message: "pay the rent", Principal: "requester"})
	p := waitPending(t, e.c, run.GetID(), map[string]bool{})

	cli := func(args ...string) (string, error) {
		cmd := exec.Command(airlockBin, args...)
		cmd.Env = append(os.Environ(), "AIRLOCK_HOME="+e.home, "AIRLOCK_DATABASE_URL="+e.dbURL, "AIRLOCK_APPROVERS="+e.approvers,
			"AIRLOCK_APPROVER_KEY=", "AIRLOCK_APPROVER_KEY_FILE=", "TEMPORAL_ADDRESS="+devServer.Address, "TEMPORAL_NAMESPACE="+devServer.Namespace)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := cli("approve", p.ConfirmationID, "--credential", creds["erin"]); !strings.Contains(out, "1 of 2") {
		t.Fatalf("erin's approval: %v\n%s", err, out)
	}
	if out, err := cli("approvers", "remove", "erin"); err != nil {
		t.Fatalf("approvers remove erin: %v\n%s", err, out)
	}
	out, err := cli("approve", p.ConfirmationID, "--credential", creds["carol"])
	if !strings.Contains(out, "1 of 2") {
		t.Fatalf("carol's approval after erin's removal: %v\n%s", err, out)
	}
	time.Sleep(time.Second)
	if n := len(e.rec.of("send_money")); n != 0 {
		t.Fatalf("the payment ran on the approval of a removed approver (%d runs)", n)
	}
	var dropped bool
	for _, r := range e.audit(run.GetID()) {
		if r.Approver == "carol" && strings.Contains(r.Detail, "erin: erin is no longer an approver") {
			dropped = true
		}
	}
	if !dropped {
		t.Fatalf("the audit does not say erin's approval was dropped: %+v", e.audit(run.GetID()))
	}
	if out, err := cli("approve", p.ConfirmationID, "--credential", creds["dave"]); err != nil {
		t.Fatalf("dave's approval: %v\n%s", err, out)
	}
	res := result(t, run)
	if got := outcomeList(res); got != "send_money:executed" || res.Outcomes[0].Approver != "dave" {
		t.Fatalf("outcomes = %s %+v", got, res.Outcomes)
	}
	if n := len(e.rec.of("send_money")); n != 1 {
		t.Fatalf("send_money ran %d times", n)
	}
}
