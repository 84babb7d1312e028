package catalog

// State is a state of the turn's catalog controller. The transitions are closed (P072 "Local
// Contract Freeze"): awaiting-inference → pending-read → pending-egress → awaiting-inference,
// ending completed or stopped; a terminal state never changes.
type State string

// Controller states.
const (
	AwaitingInference State = "awaiting-inference"
	PendingRead       State = "pending-read"
	PendingEgress     State = "pending-egress"
	Completed         State = "completed"
	Stopped           State = "stopped"
)

// Terminal reports whether s is completed or stopped.
func (s State) Terminal() bool { return s == Completed || s == Stopped }

// Event is what happened to the controller.
type Event string

// Controller events.
const (
	// EventRead: one valid allowlisted proposal (a catalog read that passed the gates).
	EventRead Event = "read"
	// EventResult: the read's result, for the pending correlation.
	EventResult Event = "result"
	// EventEgress: the result passed classification and the catalog context budget.
	EventEgress Event = "egress"
	// EventAnswer: an ordinary answer (no calls).
	EventAnswer Event = "answer"
	// EventEffect: a message with no catalog call: handed unchanged to the executor.
	EventEffect Event = "effect"
	// EventMixed: one message proposed catalog reads and other calls: ambiguous.
	EventMixed Event = "mixed"
	// EventRefusal, EventCancel, EventDeadline, EventBudget stop a nonterminal controller.
	EventRefusal  Event = "refusal"
	EventCancel   Event = "cancel"
	EventDeadline Event = "deadline"
	EventBudget   Event = "budget"
)

// Correlation binds a read to its result: the turn (agent), the principal (binding), the
// proposal sequence, the capability, the request digest and the controller step.
type Correlation struct {
	Workflow     string `json:"workflow"`
	Principal    string `json:"principal"`
	Seq          int    `json:"seq"`
	CapabilityID string `json:"capability_id"`
	ArgsDigest   string `json:"args_digest"`
	Step         int    `json:"step"`
}

// Controller is the catalog controller of one turn: its state, the pending correlation and
// what the turn has used of its bounds. The zero value is not ready: use NewController.
type Controller struct {
	State   State       `json:"state"`
	Pending Correlation `json:"pending"`
	Step    int         `json:"step"`
	Reads   int         `json:"reads"`
	Pages   int         `json:"pages"`
	Rounds  int         `json:"rounds"`
	Bytes   int         `json:"bytes"`
	// StopReason says why the controller stopped ("" unless stopped).
	StopReason string `json:"stop_reason,omitempty"`
}

// NewController is a controller awaiting inference.
func NewController() *Controller { return &Controller{State: AwaitingInference} }

// next is the closed transition table: the next state for (state, event), and whether the
// pair is in the table at all.
func next(s State, e Event) (State, bool) {
	if s.Terminal() {
		return s, false
	}
	switch e {
	case EventRefusal, EventCancel, EventDeadline, EventBudget:
		return Stopped, true
	}
	switch {
	case s == AwaitingInference && e == EventRead:
		return PendingRead, true
	case s == PendingRead && e == EventResult:
		return PendingEgress, true
	case s == PendingEgress && e == EventEgress:
		return AwaitingInference, true
	case s == AwaitingInference && e == EventAnswer:
		return Completed, true
	case s == AwaitingInference && e == EventEffect:
		return Completed, true
	case s == AwaitingInference && e == EventMixed:
		return Stopped, true
	}
	return s, false
}

// Fire applies e (with corr for read, result and egress) and reports whether it was accepted.
// A result or egress for another correlation, any event in a terminal state (a late or
// duplicate result) and any pair outside the table leave the state unchanged and return false.
// reason is kept as StopReason when e stops the controller.
func (c *Controller) Fire(e Event, corr Correlation, reason string) bool {
	if (e == EventResult || e == EventEgress) && corr != c.Pending {
		return false
	}
	to, ok := next(c.State, e)
	if !ok {
		return false
	}
	if e == EventRead {
		c.Step++
		corr.Step = c.Step
		c.Pending = corr
	}
	if to == Stopped {
		c.StopReason = reason
		if c.StopReason == "" {
			c.StopReason = string(e)
		}
	}
	c.State = to
	return true
}

// Budget refusal codes of the controller (outcome budget_exhausted, the model is told).
const (
	BudgetReads   = "catalog_reads"
	BudgetPages   = "catalog_pages"
	BudgetRounds  = "catalog_rounds"
	BudgetContext = "catalog_context"
)

// AdmitRead checks the read and page bounds before a read runs and counts it: "" when
// admitted, else the budget code (MaxReads reads, MaxPages list pages per turn).
func (c *Controller) AdmitRead(list bool) string {
	if c.Reads >= MaxReads {
		return BudgetReads
	}
	if list && c.Pages >= MaxPages {
		return BudgetPages
	}
	c.Reads++
	if list {
		c.Pages++
	}
	return ""
}

// AdmitEgress checks n more bytes of catalog result against MaxContextBytes and counts them:
// "" when they may enter model context, else BudgetContext.
func (c *Controller) AdmitEgress(n int) string {
	if c.Bytes+n > MaxContextBytes {
		return BudgetContext
	}
	c.Bytes += n
	return ""
}

// Inferred counts one inference round consumed by a nonterminal controller.
func (c *Controller) Inferred() {
	if !c.State.Terminal() {
		c.Rounds++
	}
}

// MayInfer reports whether another inference round may start for this controller: always
// once it is terminal (the executor's own bounds apply), else only below MaxRounds.
func (c *Controller) MayInfer() bool { return c.State.Terminal() || c.Rounds < MaxRounds }
