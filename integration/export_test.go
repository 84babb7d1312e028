package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/proposals"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/workflows"
)

// acceptCorrection drives a real correction end to end (turn 1 answers, turn 2 proposes a
// correction of it, bob accepts, the proposal workflow projects a judgment) and returns the
// turn workflow ids and the judgment.
func acceptCorrection(t *testing.T, c client.Client, cfg config.Config, st *store.Store, conv string) (string, string, store.Judgment) {
	t.Helper()
	ctx := context.Background()
	if r := result(t, startTurnSeq(t, c, cfg, conv, 1, "What is the capital of Australia?")); r.EndReason != "answered" {
		t.Fatalf("turn 1: %+v", r)
	}
	if r := result(t, startTurnSeq(t, c, cfg, conv, 2, "Correct your last reply.")); r.EndReason != "proposed" {
		t.Fatalf("turn 2: %+v", r)
	}
	wf1, wf2 := workflows.TurnWorkflowID(conv, 1), workflows.TurnWorkflowID(conv, 2)
	rows, err := st.ListProposals(ctx, wf2)
	if err != nil || len(rows) != 1 {
		t.Fatalf("proposals: %v %v", rows, err)
	}
	d, err := proposals.NewDecision(rows[0], proposals.Accept, "", "sub-1", signer(t, "bob"), "bob")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.AppendProposalDecision(ctx, d); err != nil {
		t.Fatal(err)
	}
	pwf := workflows.ProposalWorkflowID(rows[0].ID)
	eventually(t, 30*time.Second, "the proposal workflow started", func() bool {
		return c.SignalWorkflow(ctx, pwf, "", workflows.SignalProposalDecision, workflows.ProposalDecisionSignal{DecisionID: d.ID}) == nil
	})
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var status workflows.ProposalStatus
	if err := c.GetWorkflow(wctx, pwf, "").Get(wctx, &status); err != nil || status.Receipt != proposals.ReceiptProjected {
		t.Fatalf("proposal workflow: %+v %v", status, err)
	}
	j, err := st.LatestJudgment(ctx, proposals.OutputID(wf1))
	if err != nil {
		t.Fatal(err)
	}
	return wf1, wf2, j
}

// runExport runs `airlock export private-training` as a subprocess against cfg's store.
func runExport(t *testing.T, cfg config.Config, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(airlockBin, append([]string{"export", "private-training"}, args...)...)
	cmd.Env = append(os.Environ(), "AIRLOCK_HOME="+cfg.Home, "AIRLOCK_DATABASE_URL="+cfg.DatabaseURL, "AIRLOCK_APPROVERS="+cfg.ApproversFile)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Item 7 on the real stack: a projected correction is exported with its whole provenance
// chain (original output and correction, decision, proposal, snapshot) to an owner-only file
// and manifest; the command refuses without the acknowledgement and refuses standard output;
// a judgment whose decision is missing is excluded with decision_missing, and once the
// proposer turn's context snapshot is tampered with the projected judgment is excluded too
// (proposal_untrusted): never guessed, counted in the manifest, whose digest is the file's.
func TestExportPrivateTrainingInclusionAndExclusion(t *testing.T) {
	model := newFakeModel(t,
		answer("The capital of Australia is Sydney."),
		calls(call("c1", "submit_correction", correctionArgs("latest", secretReplacement))),
	)
	c, cfg, st := liveModelStack(t, model)
	ctx := context.Background()
	wf1, wf2, j := acceptCorrection(t, c, cfg, st, "export-"+cfg.TaskQueue)
	// A judgment whose feedback source names no decision: its chain is broken.
	orphan, err := st.RecordJudgment(ctx, store.Judgment{ID: "jdg-orphan", Kind: proposals.JudgmentKindCorrect,
		Criterion: proposals.CriterionSelfCorrection, CriterionVersion: 1, Actor: "bob", TargetWorkflowID: wf1,
		TargetOutputID: proposals.OutputID(wf1), FeedbackSource: "pdec-nonexistent", Replacement: "guessed", QualityEligible: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "train.jsonl")

	// Refusals: no acknowledgement; standard output in any spelling. Nothing is written.
	if o, err := runExport(t, cfg, "--output", out); err == nil || !strings.Contains(o, "acknowledge") {
		t.Fatalf("without acknowledgement: %v %s", err, o)
	}
	for _, target := range []string{"-", "/dev/stdout", "/proc/self/fd/1"} {
		o, err := runExport(t, cfg, "--output", target, "--acknowledge-sensitive-private-training")
		if err == nil || strings.Contains(o, "CORRECTED-ANSWER") || strings.Contains(o, "Sydney") {
			t.Fatalf("output %s: %v %s", target, err, o)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a refused export wrote a file: %v", err)
	}

	o, err := runExport(t, cfg, "--output", out, "--acknowledge-sensitive-private-training")
	if err != nil || strings.Contains(o, "CORRECTED-ANSWER") {
		t.Fatalf("export: %v %s", err, o)
	}
	recs, m := readExport(t, out)
	if len(recs) != 1 || m.Judgments != 2 || m.Included != 1 || m.Excluded != 1 || m.ExcludedByReason[proposals.ExcludeDecisionMissing] != 1 ||
		len(m.Exclusions) != 1 || m.Exclusions[0] != (proposals.Exclusion{JudgmentID: orphan.ID, Reason: proposals.ExcludeDecisionMissing}) {
		t.Fatalf("records %+v manifest %+v", recs, m)
	}
	r := recs[0]
	if r.JudgmentID != j.ID || r.OriginalOutput != "The capital of Australia is Sydney." || r.CorrectedOutput != secretReplacement ||
		r.TargetWorkflowID != wf1 || r.ProposerWorkflow != wf2 || r.DecisionID != j.FeedbackSource || r.Disposition != proposals.Accept ||
		r.Actor != "bob" || r.SnapshotID == "" || r.SnapshotSHA256 == "" || r.ReceiptID != proposals.ReceiptID(j.FeedbackSource) {
		t.Fatalf("record: %+v", r)
	}

	// Break the included judgment's chain: the proposer turn's context snapshot bytes change.
	db, err := sqlx.Open("postgres", cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE proposal_snapshots SET body = body || '\x20'::bytea WHERE workflow_id = $1`, wf2); err != nil {
		t.Fatal(err)
	}
	if o, err := runExport(t, cfg, "--output", out, "--acknowledge-sensitive-private-training"); err != nil {
		t.Fatalf("export: %v %s", err, o)
	}
	recs, m = readExport(t, out)
	if len(recs) != 0 || m.Included != 0 || m.Excluded != 2 || m.ExcludedByReason[proposals.ExcludeProposalUntrusted] != 1 ||
		m.ExcludedByReason[proposals.ExcludeDecisionMissing] != 1 {
		t.Fatalf("after tampering: records %+v manifest %+v", recs, m)
	}
}

// readExport reads an export and its manifest, checking both are owner-only regular files, no
// temporary file is left behind and the manifest's digest and size are the export's.
func readExport(t *testing.T, path string) ([]proposals.TrainingRecord, proposals.Manifest) {
	t.Helper()
	for _, p := range []string{path, proposals.ManifestPath(path)} {
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", p, fi.Mode(), err)
		}
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 2 {
		t.Fatalf("export directory holds %d entries, want the export and its manifest", len(ents))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m proposals.Manifest
	mb, err := os.ReadFile(proposals.ManifestPath(path))
	if err != nil || json.Unmarshal(mb, &m) != nil {
		t.Fatalf("manifest: %v %s", err, mb)
	}
	if m.Format != proposals.ExportFormat || !m.Sensitive || m.SHA256 != proposals.Digest(data) || m.Bytes != len(data) || m.Export != filepath.Base(path) {
		t.Fatalf("manifest does not describe the export: %+v", m)
	}
	if strings.Contains(string(mb), "CORRECTED-ANSWER") || strings.Contains(string(mb), "Sydney") {
		t.Fatal("manifest carries content")
	}
	var recs []proposals.TrainingRecord
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r proposals.TrainingRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	return recs, m
}

// Item 5 seen from the CLI: `airlock turn show` prints a turn's effective output, the
// correction judgment's replacement with the judgment, actor and decision, once that judgment
// exists; the proposer turn (no judgment on its output) shows none.
func TestTurnShowEffectiveCorrectedOutput(t *testing.T) {
	model := newFakeModel(t,
		answer("The capital of Australia is Sydney."),
		calls(call("c1", "submit_correction", correctionArgs("latest", secretReplacement))),
	)
	c, cfg, st := liveModelStack(t, model)
	wf1, wf2, j := acceptCorrection(t, c, cfg, st, "show-"+cfg.TaskQueue)
	show := func(id string) string {
		cmd := exec.Command(airlockBin, "turn", "show", id)
		cmd.Env = append(os.Environ(), "AIRLOCK_HOME="+cfg.Home, "AIRLOCK_DATABASE_URL="+cfg.DatabaseURL, "AIRLOCK_APPROVERS="+cfg.ApproversFile)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("turn show %s: %v %s", id, err, out)
		}
		return string(out)
	}
	out := show(wf1)
	if !strings.Contains(out, "assistant: The capital of Australia is Sydney.") ||
		!strings.Contains(out, "effective output (corrected): "+secretReplacement) ||
		!strings.Contains(out, j.ID) || !strings.Contains(out, "by bob") || !strings.Contains(out, j.FeedbackSource) {
		t.Fatalf("turn show of the corrected turn:\n%s", out)
	}
	if out := show(wf2); strings.Contains(out, "effective output") {
		t.Fatalf("turn show of an uncorrected turn:\n%s", out)
	}
}
