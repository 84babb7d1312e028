package store

import (
	"errors"
	"testing"
	"time"
)

// A turn run's requester is recorded once; a retried first round gets the same row back; a
// retry of the run (same first run) may use the attestation again, another start of the
// workflow id may not (ErrAttestationUsed), nor a second attestation for a run that has one.
func TestRequesters(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		r := TurnRequester{WorkflowID: "turn/c/1", RunID: "run-1", Principal: "user:carol", Client: "chat", Signature: "sig-1", At: base}
		got, err := s.RecordRequester(ctx, r)
		if err != nil || got.Principal != "user:carol" || got.Client != "chat" || !got.At.Equal(base.Truncate(time.Microsecond)) {
			t.Fatalf("record = %+v, %v", got, err)
		}
		if got, err := s.RecordRequester(ctx, r); err != nil || got.Signature != "sig-1" {
			t.Fatalf("retry = %+v, %v", got, err)
		}
		retry := r
		retry.RunID, retry.FirstRunID = "run-1b", "run-1"
		if got, err := s.RecordRequester(ctx, retry); err != nil || got.RunID != "run-1b" {
			t.Fatalf("workflow retry = %+v, %v", got, err)
		}
		replay := r
		replay.RunID, replay.FirstRunID = "run-2", "run-2"
		if _, err := s.RecordRequester(ctx, replay); !errors.Is(err, ErrAttestationUsed) {
			t.Fatalf("same attestation, other run: %v, want ErrAttestationUsed", err)
		}
		other := r
		other.Signature, other.Principal = "sig-2", "user:mallory"
		if _, err := s.RecordRequester(ctx, other); !errors.Is(err, ErrAttestationUsed) {
			t.Fatalf("second attestation for the run: %v, want ErrAttestationUsed", err)
		}
		if got, err := s.GetRequester(ctx, "turn/c/1", ""); err != nil || got.Principal != "user:carol" {
			t.Fatalf("latest = %+v, %v", got, err)
		}
		if _, err := s.GetRequester(ctx, "turn/c/2", ""); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown turn: %v", err)
		}
	})
}
