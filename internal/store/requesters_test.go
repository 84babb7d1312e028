package store

import (
	"errors"
	"fmt"
	"slices"
	"strings"
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

// The inbox's eligibility filter keeps what an approver's groups may decide: confirmations for
// every approver, and those sharing one of their groups, whatever LIKE would make of a group
// name with '_' or '%'; the approver groups round-trip.
func TestEligibleGroupsFilter(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		for i, groups := range [][]string{nil, {"payments"}, {"ops", "pay_x"}, {"payXx"}} {
			c := newConfirmation(fmt.Sprintf("conf-%d", i), byte(i+1))
			c.Seq, c.ApproverGroups = i+1, groups
			if _, err := s.CreateConfirmation(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		if c, err := s.GetConfirmation(ctx, "conf-2"); err != nil || strings.Join(c.ApproverGroups, " ") != "ops pay_x" {
			t.Fatalf("groups round trip: %+v, %v", c.ApproverGroups, err)
		}
		for want, f := range map[string]string{
			"conf-0":                      NoGroups,
			"conf-0 conf-1":               Eligible([]string{"payments"}),
			"conf-0 conf-2":               Eligible([]string{"pay_x"}),
			"conf-0 conf-2 conf-3":        Eligible([]string{"ops", "payXx"}),
			"conf-0 conf-1 conf-2 conf-3": "",
		} {
			rows, err := s.ListUndecidedPage(ctx, UndecidedFilter{EligibleGroups: f}, 10, 0)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range rows {
				ids = append(ids, r.ID)
			}
			slices.Sort(ids)
			n, err := s.CountUndecided(ctx, UndecidedFilter{EligibleGroups: f})
			if got := strings.Join(ids, " "); got != want || err != nil || n != len(ids) {
				t.Errorf("filter %q: %s (count %d, %v), want %s", f, got, n, err, want)
			}
		}
	})
}
