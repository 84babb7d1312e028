package catalog

import "testing"

// The controller's transitions, as a table: every (state, event) pair, the next state and
// whether the table accepts it. Terminal states never change; a result for another
// correlation is ignored.
func TestControllerTransitionTable(t *testing.T) {
	corr := Correlation{Workflow: "turn/c/1", Principal: "alice", Seq: 1, CapabilityID: ListID, ArgsDigest: "d"}
	states := []State{AwaitingInference, PendingRead, PendingEgress, Completed, Stopped}
	events := []Event{EventRead, EventResult, EventEgress, EventAnswer, EventEffect, EventMixed, EventRefusal, EventCancel, EventDeadline, EventBudget}
	want := map[State]map[Event]State{
		AwaitingInference: {EventRead: PendingRead, EventAnswer: Completed, EventEffect: Completed, EventMixed: Stopped,
			EventRefusal: Stopped, EventCancel: Stopped, EventDeadline: Stopped, EventBudget: Stopped},
		PendingRead:   {EventResult: PendingEgress, EventRefusal: Stopped, EventCancel: Stopped, EventDeadline: Stopped, EventBudget: Stopped},
		PendingEgress: {EventEgress: AwaitingInference, EventRefusal: Stopped, EventCancel: Stopped, EventDeadline: Stopped, EventBudget: Stopped},
		Completed:     {},
		Stopped:       {},
	}
	for _, s := range states {
		for _, e := range events {
			c := &Controller{State: s}
			if s == PendingRead || s == PendingEgress {
				c.Pending = corr
			}
			to, in := want[s][e]
			ok := c.Fire(e, corr, "")
			if ok != in || (in && c.State != to) || (!in && c.State != s) {
				t.Errorf("%s + %s: state %s accepted %v; want %v (%s)", s, e, c.State, ok, in, to)
			}
		}
	}
	// A late or duplicate result, or one for another correlation, changes nothing.
	c := NewController()
	c.Fire(EventRead, corr, "")
	other := corr
	other.Seq = 2
	if c.Fire(EventResult, other, "") || c.State != PendingRead {
		t.Fatalf("foreign result accepted: %+v", c)
	}
	if !c.Fire(EventResult, c.Pending, "") || !c.Fire(EventEgress, c.Pending, "") || !c.Fire(EventAnswer, Correlation{}, "") {
		t.Fatal("the main path was refused")
	}
	if c.Fire(EventResult, c.Pending, "") || c.State != Completed {
		t.Fatalf("a duplicate result after completion: %+v", c)
	}
	s := NewController()
	s.Fire(EventMixed, Correlation{}, "ambiguous")
	if s.State != Stopped || s.StopReason != "ambiguous" || s.Fire(EventRead, corr, "") {
		t.Fatalf("stopped: %+v", s)
	}
}

// Per-turn bounds: 3 reads, 2 pages, 64 KiB of catalog context, 4 inference rounds.
func TestControllerBounds(t *testing.T) {
	c := NewController()
	for i, want := range []string{"", "", BudgetPages} {
		if got := c.AdmitRead(true); got != want {
			t.Fatalf("page %d: %q, want %q", i+1, got, want)
		}
	}
	for i, want := range []string{"", BudgetReads} {
		if got := c.AdmitRead(false); got != want {
			t.Fatalf("describe %d: %q, want %q", i+1, got, want)
		}
	}
	for i, c2 := range []struct {
		n    int
		want string
	}{{MaxListBytes, ""}, {MaxListBytes, ""}, {MaxDescribeBytes, ""}, {1, BudgetContext}} {
		if got := c.AdmitEgress(c2.n); got != c2.want {
			t.Fatalf("egress %d: %q, want %q", i+1, got, c2.want)
		}
	}
	if c.Bytes != MaxContextBytes {
		t.Fatalf("bytes %d", c.Bytes)
	}
	r := NewController()
	for i := 0; i < MaxRounds; i++ {
		if !r.MayInfer() {
			t.Fatalf("round %d refused", i+1)
		}
		r.Inferred()
	}
	if r.MayInfer() {
		t.Fatal("a fifth round while the controller runs")
	}
	r.Fire(EventAnswer, Correlation{}, "")
	if !r.MayInfer() {
		t.Fatal("a terminal controller bounds nothing further")
	}
}
