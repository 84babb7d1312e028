package proposals

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/store"
)

// ExportFormat names the private-training export format (one JSON record a line).
const ExportFormat = "airlock.private-training.v1"

// Exclusion reason codes of a private-training export (content-free). A judgment is
// excluded with the first link of its provenance chain that is missing or does not verify;
// nothing is ever guessed or repaired.
const (
	ExcludeNotCorrection     = "not_agent_self_correction" // kind or criterion is not correct / agent-self-correction v1
	ExcludeNotQuality        = "not_quality_eligible"
	ExcludeDecisionMissing   = "decision_missing"    // feedback_source names no stored decision
	ExcludeProposalMissing   = "proposal_missing"    // the decision's proposal is not stored
	ExcludeProposalUntrusted = "proposal_untrusted"  // VerifyProposal failed (record, snapshot, binding, proposer turn)
	ExcludeDecisionUntrusted = "decision_untrusted"  // VerifyDecision failed (identity, digest, attestation)
	ExcludeJudgmentMismatch  = "judgment_mismatch"   // the judgment is not the projection of its decision
	ExcludeReceiptMissing    = "receipt_missing"     // no correction.projected receipt for the decision
	ExcludeTargetTurnMissing = "target_turn_missing" // the corrected turn's result is not stored
	ExcludeTargetChanged     = "target_output_changed"
)

// TrainingRecord is one exported judgment with its complete provenance chain: the judgment,
// the human decision it projects, the proposal and proposer turn the decision is on, the
// context snapshot that admitted the target, and the delivered output it corrects (whose
// SHA-256 equals the snapshot's binding).
type TrainingRecord struct {
	JudgmentID       string `json:"judgment_id"`
	Kind             string `json:"kind"`
	Criterion        string `json:"criterion"`
	CriterionVersion int    `json:"criterion_version"`
	Actor            string `json:"actor"`
	TargetWorkflowID string `json:"target_workflow_id"`
	TargetOutputID   string `json:"target_output_id"`
	TargetInputID    string `json:"target_input_id"`
	OriginalOutput   string `json:"original_output"`
	OriginalSHA256   string `json:"original_output_sha256"`
	CorrectedOutput  string `json:"corrected_output"`
	DecisionID       string `json:"decision_id"`
	Disposition      string `json:"disposition"`
	DecisionDigest   string `json:"decision_digest"`
	ReceiptID        string `json:"receipt_id"`
	ProposalID       string `json:"proposal_id"`
	ProposerWorkflow string `json:"proposer_workflow_id"`
	ProposerOutputID string `json:"proposer_output_id"`
	SnapshotID       string `json:"snapshot_id"`
	SnapshotSHA256   string `json:"snapshot_sha256"`
	JudgedAt         string `json:"judged_at"`
}

// Exclusion names one excluded judgment and its reason code.
type Exclusion struct {
	JudgmentID string `json:"judgment_id"`
	Reason     string `json:"reason"`
}

// Manifest describes one private-training export: counts, the SHA-256 and size in bytes of
// the export file, and every excluded judgment with its reason code (never content).
type Manifest struct {
	Format           string         `json:"format"`
	Sensitive        bool           `json:"sensitive_private_training"`
	CreatedAt        string         `json:"created_at"`
	Export           string         `json:"export_file"`
	SHA256           string         `json:"sha256"`
	Bytes            int            `json:"bytes"`
	Judgments        int            `json:"judgments"`
	Included         int            `json:"included"`
	Excluded         int            `json:"excluded"`
	ExcludedByReason map[string]int `json:"excluded_by_reason"`
	Exclusions       []Exclusion    `json:"exclusions"`
}

// BuildPrivateTraining walks every judgment and keeps only those whose whole provenance
// chain verifies (judgment → decision → proposal → proposer turn → context snapshot and
// binding → corrected output); set is the approvers file the decisions' attestations are
// verified against. It returns the export bytes (one TrainingRecord JSON a line, in
// judgment order) and the manifest (without file name). A store error is returned as an
// error; a broken chain is an exclusion.
func BuildPrivateTraining(ctx context.Context, st *store.Store, set *approvers.Set, now time.Time) ([]byte, Manifest, error) {
	js, err := st.ListJudgments(ctx)
	if err != nil {
		return nil, Manifest{}, err
	}
	m := Manifest{Format: ExportFormat, Sensitive: true, CreatedAt: now.UTC().Format(time.RFC3339Nano),
		Judgments: len(js), ExcludedByReason: map[string]int{}, Exclusions: []Exclusion{}}
	var out bytes.Buffer
	for _, j := range js {
		rec, reason, err := chainOf(ctx, st, set, j)
		if err != nil {
			return nil, Manifest{}, err
		}
		if reason != "" {
			m.Excluded++
			m.ExcludedByReason[reason]++
			m.Exclusions = append(m.Exclusions, Exclusion{JudgmentID: j.ID, Reason: reason})
			continue
		}
		b, err := json.Marshal(rec)
		if err != nil {
			return nil, Manifest{}, fmt.Errorf("proposals: export record: %w", err)
		}
		out.Write(b)
		out.WriteByte('\n')
		m.Included++
	}
	m.SHA256, m.Bytes = Digest(out.Bytes()), out.Len()
	return out.Bytes(), m, nil
}

// chainOf replays j's provenance chain: a reason code when a link is missing or does not
// verify, an error only when the store fails.
func chainOf(ctx context.Context, st *store.Store, set *approvers.Set, j store.Judgment) (TrainingRecord, string, error) {
	missing := func(err error, reason string) (TrainingRecord, string, error) {
		if errors.Is(err, store.ErrNotFound) {
			return TrainingRecord{}, reason, nil
		}
		return TrainingRecord{}, "", err
	}
	if j.Kind != JudgmentKindCorrect || j.Criterion != CriterionSelfCorrection || j.CriterionVersion != CriterionSelfCorrectionV1 {
		return TrainingRecord{}, ExcludeNotCorrection, nil
	}
	if !j.QualityEligible {
		return TrainingRecord{}, ExcludeNotQuality, nil
	}
	d, err := st.GetProposalDecisionByID(ctx, j.FeedbackSource)
	if err != nil {
		return missing(err, ExcludeDecisionMissing)
	}
	row, err := st.GetProposal(ctx, d.ProposalID)
	if err != nil {
		return missing(err, ExcludeProposalMissing)
	}
	p, err := VerifyProposal(ctx, st, row)
	if errors.Is(err, ErrUntrusted) {
		return TrainingRecord{}, ExcludeProposalUntrusted, nil
	}
	if err != nil {
		return TrainingRecord{}, "", err
	}
	if err := VerifyDecision(p, d, set); err != nil {
		return TrainingRecord{}, ExcludeDecisionUntrusted, nil
	}
	want := p.Replacement
	if d.Disposition == Edit {
		want = d.Replacement
	}
	if p.Kind != KindCorrection || p.Target == nil || d.Disposition == Reject || j.ID != JudgmentID(d.ID) || j.Actor != d.Actor ||
		j.TargetWorkflowID != p.Target.WorkflowID || j.TargetOutputID != p.Target.OutputID || j.Replacement != want {
		return TrainingRecord{}, ExcludeJudgmentMismatch, nil
	}
	rc, err := st.GetReceipt(ctx, d.ID)
	if err != nil {
		return missing(err, ExcludeReceiptMissing)
	}
	if rc.Kind != ReceiptProjected || rc.ID != ReceiptID(d.ID) || rc.ProposalID != p.ID {
		return TrainingRecord{}, ExcludeReceiptMissing, nil
	}
	res, err := st.GetTurnResult(ctx, p.Target.WorkflowID)
	if err != nil {
		return missing(err, ExcludeTargetTurnMissing)
	}
	var tr struct {
		Status string `json:"status"`
		Prose  string `json:"prose"`
	}
	if err := json.Unmarshal(res, &tr); err != nil || tr.Status != "completed" {
		return TrainingRecord{}, ExcludeTargetTurnMissing, nil
	}
	if Digest([]byte(tr.Prose)) != p.Target.OutputSHA256 {
		return TrainingRecord{}, ExcludeTargetChanged, nil
	}
	return TrainingRecord{JudgmentID: j.ID, Kind: j.Kind, Criterion: j.Criterion, CriterionVersion: j.CriterionVersion, Actor: j.Actor,
		TargetWorkflowID: j.TargetWorkflowID, TargetOutputID: j.TargetOutputID, TargetInputID: p.Target.InputID,
		OriginalOutput: tr.Prose, OriginalSHA256: p.Target.OutputSHA256, CorrectedOutput: j.Replacement,
		DecisionID: d.ID, Disposition: d.Disposition, DecisionDigest: d.Digest, ReceiptID: rc.ID,
		ProposalID: p.ID, ProposerWorkflow: p.Proposer.WorkflowID, ProposerOutputID: p.Proposer.OutputID,
		SnapshotID: p.Proposer.SnapshotID, SnapshotSHA256: p.Proposer.SnapshotSHA256,
		JudgedAt: j.CreatedAt.UTC().Format(time.RFC3339Nano)}, "", nil
}

// ErrExportTarget is wrapped when an export path is refused: standard output or any other
// device, a symlink, or anything but a regular file or a new name in an existing directory.
var ErrExportTarget = errors.New("proposals: refused export path")

// ManifestPath is the manifest file written beside export file path.
func ManifestPath(path string) string { return path + ".manifest.json" }

// WritePrivateTraining checks path, writes data there and the manifest (with the export's
// file name) beside it (ManifestPath), each owner-only (0600) and atomically (temporary file,
// fsync, rename, directory fsync): the export first, so a manifest never describes a file
// that is not there. Standard output ("-", /dev/stdout, /dev/fd/N, /proc/self/fd/N), devices
// and symlinks are refused with ErrExportTarget.
func WritePrivateTraining(path string, data []byte, m Manifest) error {
	if err := checkExportPath(path); err != nil {
		return err
	}
	if err := checkExportPath(ManifestPath(path)); err != nil {
		return err
	}
	m.Export = filepath.Base(path)
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("proposals: manifest: %w", err)
	}
	dir := filepath.Dir(path)
	if err := writeAtomic(dir, path, data); err != nil {
		return fmt.Errorf("proposals: write export: %w", err)
	}
	if err := writeAtomic(dir, ManifestPath(path), append(mb, '\n')); err != nil {
		return fmt.Errorf("proposals: write manifest: %w", err)
	}
	return nil
}

func checkExportPath(path string) error {
	clean := filepath.Clean(path)
	if path == "" || path == "-" || clean == "/dev/stdout" || clean == "/dev/stderr" || strings.HasPrefix(clean, "/dev/") ||
		strings.HasPrefix(clean, "/proc/") {
		return fmt.Errorf("%w: %q (the export is never written to standard output or a device)", ErrExportTarget, path)
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("%w: %v", ErrExportTarget, err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%w: %q is not a regular file", ErrExportTarget, path)
	}
	di, err := os.Stat(filepath.Dir(path))
	if err != nil || !di.IsDir() {
		return fmt.Errorf("%w: the directory of %q does not exist", ErrExportTarget, path)
	}
	return nil
}
