package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/present"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/token"
	"github.com/airlock-dev/airlock/presentation"
	"github.com/airlock-dev/airlock/workflows"
)

// turnWorkflowName is the workflow type workers register TurnWorkflow under
// (workers.TurnWorkflowName; a test keeps them equal without this package importing the
// worker's dependencies).
const turnWorkflowName = "TurnWorkflow"

// Options configure a Client. Only TaskQueue matters to a client that starts turns with
// StartTurnSeq and reads results; the rest are for StartTurn and for deciding.
type Options struct {
	// TaskQueue is the task queue the turn workers poll ("" = TaskQueue, "airlock-turns").
	TaskQueue string
	// HostPort and Namespace are the Temporal frontend and namespace Dial connects to ("" =
	// the SDK's environment settings: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, profiles; else
	// localhost:7233 and "default"). New uses its Temporal client's own namespace.
	HostPort, Namespace string
	// DatabaseURL is the Airlock store the workers use (postgres://…, or sqlite:PATH on the
	// worker's machine). StartTurn numbers turns in it; Decide reads the confirmation's sealed
	// token from it. The store must exist (a worker creates it).
	DatabaseURL string
	// ApproverKey (64 hex characters) or ApproverKeyFile (a file holding them) is the key the
	// workers seal tokens with for approvers (AIRLOCK_APPROVER_KEY, $AIRLOCK_HOME/keys/approver.key).
	// Decide needs one; ApproverKey wins when both are set.
	ApproverKey     string
	ApproverKeyFile string
	// CredentialFile is the approver credential that attests every decision (it becomes
	// approval.Request.Signer): an approver's own credential, created by `airlock approvers add
	// NAME`, or an approver surface's credential. Decide needs one; workers refuse an
	// unattested decision (approver_unauthenticated).
	CredentialFile string
	// Approver is the approver a surface credential vouches for (a surface authenticated them);
	// leave it empty with an approver's own credential, whose name is the approver.
	Approver string
	// ClientCredentialFile is the client credential every turn this client starts is attested
	// with (issue 21; internal/clients): created by `airlock clients add NAME --principal P`,
	// whose registration says which principals it may start turns for
	// (AIRLOCK_CLIENT_CREDENTIAL, default <user config dir>/airlock/client.json). StartTurn
	// needs one; workers end an unattested turn without calling the model.
	ClientCredentialFile string
	// APIURL and APIKey, when set, make the Client talk to Airlock's application API (airlock
	// api serve; issue 32) instead of Temporal and the store: StartTurn, Result, Stream,
	// Pending, ListPending and Decide go over HTTP with the API key (airlock api key NAME),
	// and every other option is ignored, so an app holds neither Temporal access, the store
	// nor the approver key. The key's caller decides whom turns act for (TurnRequest.Principal
	// is not sent) and, for an approver's key, as whom decisions are made. Dial and New
	// return such a Client without connecting to Temporal; Temporal returns nil.
	APIURL, APIKey string
	// HTTPClient is the client API requests use (nil = a default one).
	HTTPClient *http.Client
	// InferMode is the infer mode of the turns this client starts whose TurnRequest names none
	// (workflows.InferRegular or workflows.InferLocal; AIRLOCK_INFER_MODE). Choose it per model:
	// local for a fast model whose rare repeated call after a worker crash is acceptable,
	// regular (the default for live models) for slow, costly ones.
	InferMode string
}

// OptionsFromEnv returns the Options the airlock CLI would use on this machine: task queue
// AIRLOCK_TASK_QUEUE; store AIRLOCK_DATABASE_URL, else the SQLite file under AIRLOCK_HOME
// (default .airlock); approver key AIRLOCK_APPROVER_KEY, else AIRLOCK_APPROVER_KEY_FILE, else
// $AIRLOCK_HOME/keys/approver.key; infer mode AIRLOCK_INFER_MODE; credential AIRLOCK_CREDENTIAL, else
// <user config dir>/airlock/credential.json. Temporal settings stay with Dial (TEMPORAL_*).
// Files that do not exist are left out, so a client that only starts turns works without them.
func OptionsFromEnv() Options {
	cfg := config.FromEnv()
	o := Options{TaskQueue: cfg.TaskQueue, DatabaseURL: cfg.StoreURL(), ApproverKey: os.Getenv("AIRLOCK_APPROVER_KEY"),
		InferMode: os.Getenv("AIRLOCK_INFER_MODE")}
	if o.ApproverKey == "" && exists(cfg.KeyFile()) {
		o.ApproverKeyFile = cfg.KeyFile()
	}
	if exists(cfg.CredentialPath()) {
		o.CredentialFile = cfg.CredentialPath()
	}
	if exists(cfg.ClientCredentialPath()) {
		o.ClientCredentialFile = cfg.ClientCredentialPath()
	}
	return o
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Errors Decide and the constructors return; a *DecisionError unwraps to one of the first
// three.
var (
	// ErrNotPending: the confirmation is unknown, expired, or another decision came first.
	ErrNotPending = errors.New("client: confirmation is not pending")
	// ErrRefused: the turn judged the decision and refused it (DecisionError.Code says why).
	ErrRefused = errors.New("client: decision refused")
	// ErrStaleDigest: the decision named other arguments than the confirmation is bound to
	// (the arguments shown were not the ones pending); nothing was sent.
	ErrStaleDigest = errors.New("client: decision made on other arguments than the pending ones")
	// ErrNotConfigured: the operation needs an option that was not set (named in the error).
	ErrNotConfigured = errors.New("client: not configured")
)

// DecisionError is a decision that did not decide its confirmation.
type DecisionError struct {
	ConfirmationID string
	// Code is "not_pending", "stale_digest", or the turn's refusal code
	// (decision_mac_invalid, approver_is_requester, approver_unauthenticated, …); passkey_required
	// when the capability is decided only with a passkey on the approver page (nothing was sent).
	Code string
	// Detail is the turn's or the store's explanation (hostile text: show it with care).
	Detail string
	// Decided and DecidedBy name the decision that came first (approved, denied, expired) and
	// its approver, when Code is not_pending and it is known.
	Decided, DecidedBy string
	// Reissued says the proposal got a fresh token after the refusal and still waits.
	Reissued bool
	kind     error
	cause    error
}

// Error says which confirmation and why, in the approver surfaces' words.
func (e *DecisionError) Error() string { return "client: " + e.cause.Error() }

// Unwrap returns ErrNotPending, ErrRefused or ErrStaleDigest, and the underlying error.
func (e *DecisionError) Unwrap() []error { return []error{e.kind, e.cause} }

// Client starts turns, waits for results, lists pending confirmations and decides them. It is
// safe for concurrent use. Close it when done.
type Client struct {
	tc        tclient.Client
	ownsTC    bool
	queue     string
	st        *store.Store
	key       token.Key
	hasKey    bool
	cred      approvers.Credential
	approver  string
	starter   clients.Credential
	inferMode string
	api       *apiMode // API mode (Options.APIURL): nothing above is used
}

// Dial connects to Temporal (Options.HostPort and Namespace, else the SDK's environment
// settings) and returns a Client that owns the connection.
func Dial(ctx context.Context, opts Options) (*Client, error) {
	if opts.APIURL != "" {
		return newAPIMode(opts)
	}
	o, err := config.TemporalOptions()
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if opts.HostPort != "" {
		o.HostPort = opts.HostPort
		config.TuneForLoopback(&o)
	}
	if opts.Namespace != "" {
		o.Namespace = opts.Namespace
	}
	tc, err := tclient.DialContext(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("client: connect to Temporal at %s (namespace %s): %w", o.HostPort, o.Namespace, err)
	}
	c, err := New(ctx, tc, opts)
	if err != nil {
		tc.Close()
		return nil, err
	}
	c.ownsTC = true
	return c, nil
}

// New returns a Client on an existing Temporal client (which the caller keeps and closes).
// It opens the store and loads the approver key and credential when their options are set,
// and fails naming the option whose value is unusable.
func New(ctx context.Context, tc tclient.Client, opts Options) (*Client, error) {
	if opts.APIURL != "" {
		return newAPIMode(opts)
	}
	if tc == nil {
		return nil, fmt.Errorf("%w: New needs a Temporal client", ErrNotConfigured)
	}
	c := &Client{tc: tc, queue: opts.TaskQueue, inferMode: opts.InferMode}
	if err := (workflows.TurnRequest{InferMode: opts.InferMode}).Validate(); err != nil {
		return nil, fmt.Errorf("client: Options.InferMode: %w", err)
	}
	if c.queue == "" {
		c.queue = workflows.TaskQueue
	}
	var err error
	switch {
	case opts.ApproverKey != "":
		c.key, err = token.ParseKey(opts.ApproverKey)
		c.hasKey = err == nil
	case opts.ApproverKeyFile != "":
		c.key, err = token.LoadKey(opts.ApproverKeyFile)
		c.hasKey = err == nil
	}
	if err != nil {
		return nil, fmt.Errorf("client: approver key: %w", err)
	}
	if opts.CredentialFile != "" {
		if c.cred, err = approvers.LoadCredential(opts.CredentialFile); err != nil {
			return nil, fmt.Errorf("client: approver credential %s: %w", opts.CredentialFile, err)
		}
		if c.approver, err = approverOf(c.cred.Signer, opts.Approver); err != nil {
			return nil, fmt.Errorf("client: approver credential %s: %w", opts.CredentialFile, err)
		}
	}
	if opts.ClientCredentialFile != "" {
		if c.starter, err = clients.LoadCredential(opts.ClientCredentialFile); err != nil {
			return nil, fmt.Errorf("client: client credential %s: %w", opts.ClientCredentialFile, err)
		}
	}
	if opts.DatabaseURL != "" {
		if c.st, err = store.OpenExisting(ctx, opts.DatabaseURL); err != nil {
			return nil, fmt.Errorf("client: open the Airlock store: %w", err)
		}
	}
	return c, nil
}

// approverOf is the approver a credential decides as: its own name ("approver:<name>"), or
// the approver a surface credential ("surface:<name>") vouches for.
func approverOf(signer, approver string) (string, error) {
	if name, ok := strings.CutPrefix(signer, "approver:"); ok && approvers.NamePattern.MatchString(name) {
		if approver != "" && approver != name {
			return "", fmt.Errorf("it is %s's own credential; it cannot decide as %s", name, display.Visible(approver))
		}
		return name, nil
	}
	if strings.HasPrefix(signer, "surface:") {
		if !approvers.NamePattern.MatchString(approver) {
			return "", fmt.Errorf("a surface credential needs Options.Approver, the approver it vouches for")
		}
		return approver, nil
	}
	return "", fmt.Errorf("signer %s is neither approver:<name> nor surface:<name>", display.Visible(signer))
}

// Close closes the store and, for a Client from Dial, the Temporal connection.
func (c *Client) Close() error {
	var err error
	if c.st != nil {
		err = c.st.Close()
	}
	if c.ownsTC && c.tc != nil {
		c.tc.Close()
	}
	return err
}

// Temporal is the underlying Temporal client, for what this package does not wrap (the
// transcript query, visibility queries of your own).
func (c *Client) Temporal() tclient.Client { return c.tc }

// Turn is a handle on one started turn.
type Turn struct {
	// ID is the turn's workflow id, "turn/<conversation>/<seq>"; RunID its run ("" = latest).
	ID, RunID string
	c         *Client
}

// Turn returns a handle on the turn with workflow id id (its latest run).
func (c *Client) Turn(id string) *Turn { return &Turn{ID: id, c: c} }

// StartTurn starts a turn of req.Conversation with the next turn number from the store
// (Options.DatabaseURL). Turn ids are never reused: an id Temporal already knows makes it take
// the next number.
func (c *Client) StartTurn(ctx context.Context, req TurnRequest) (*Turn, error) {
	if c.api != nil {
		return c.api.startTurn(ctx, c, req, "")
	}
	if c.st == nil {
		return nil, fmt.Errorf("%w: StartTurn numbers turns in the store: set Options.DatabaseURL, or use StartTurnSeq", ErrNotConfigured)
	}
	if !c.starter.Valid() {
		return nil, fmt.Errorf("%w: StartTurn attests each turn with a client credential: set Options.ClientCredentialFile (airlock clients add)", ErrNotConfigured)
	}
	for range 100 {
		seq, err := c.st.NextTurnSeq(ctx, req.Conversation)
		if err != nil {
			return nil, fmt.Errorf("client: number the turn: %w", err)
		}
		t, err := c.StartTurnSeq(ctx, req, seq)
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			continue
		}
		return t, err
	}
	return nil, fmt.Errorf("client: start a turn of %s: 100 consecutive turn ids already exist in Temporal", display.Visible(req.Conversation))
}

// StartTurnSeq starts turn number seq (1, 2, …) of req.Conversation, as every Airlock client
// does (workflows.StartOptions: id, task queue, workflow task timeout, search attributes, memo
// preview). It fails with Temporal's *serviceerror.WorkflowExecutionAlreadyStarted when that
// turn id was used before: ids are never reused.
func (c *Client) StartTurnSeq(ctx context.Context, req TurnRequest, seq int) (*Turn, error) {
	if c.api != nil {
		return nil, fmt.Errorf("%w: the API numbers turns itself: use StartTurn or StartTurnOnce", ErrNotConfigured)
	}
	if req.Conversation == "" || seq < 1 {
		return nil, fmt.Errorf("client: a turn needs a conversation and a turn number >= 1")
	}
	if !clients.PrincipalPattern.MatchString(req.Principal) {
		return nil, fmt.Errorf("client: a turn needs the principal it acts for (a name matching %s), not %q", clients.PrincipalPattern, display.Visible(req.Principal))
	}
	if !c.starter.Valid() {
		return nil, fmt.Errorf("%w: StartTurn attests each turn with a client credential: set Options.ClientCredentialFile (airlock clients add)", ErrNotConfigured)
	}
	if req.InferMode == "" {
		req.InferMode = c.inferMode
	}
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	id := workflows.TurnWorkflowID(req.Conversation, seq)
	workflows.SignRequest(c.starter, &req, seq, time.Now())
	so := workflows.StartOptions(id, c.queue, req)
	so.WorkflowIDReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE
	so.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL
	so.WorkflowExecutionErrorWhenAlreadyStarted = true
	so.StaticSummary = display.Summary(fmt.Sprintf("turn %d of %s", seq, req.Conversation), workflows.SummaryLimit)
	run, err := c.tc.ExecuteWorkflow(ctx, so, turnWorkflowName, req)
	if err != nil {
		return nil, fmt.Errorf("client: start turn %s: %w", display.Visible(id), err)
	}
	return &Turn{ID: id, RunID: run.GetRunID(), c: c}, nil
}

// Result waits until the turn ends and returns its result. A turn that failed (inference
// failed for good) returns Temporal's error; its earlier results stay in the store.
func (t *Turn) Result(ctx context.Context) (TurnResult, error) {
	if t.c.api != nil {
		return t.c.api.result(ctx, t)
	}
	var res TurnResult
	if err := t.c.tc.GetWorkflow(ctx, t.ID, t.RunID).Get(ctx, &res); err != nil {
		return res, fmt.Errorf("client: turn %s: %w", display.Visible(t.ID), err)
	}
	return res, nil
}

// Pending returns the turn's confirmations waiting for a decision (the pending query).
func (t *Turn) Pending(ctx context.Context) ([]PendingConfirmation, error) {
	return t.c.Pending(ctx, t.ID)
}

// Pending returns the confirmations waiting for a decision in the turn with workflow id
// workflowID (the pending query; a worker must be running to answer it).
func (c *Client) Pending(ctx context.Context, workflowID string) ([]PendingConfirmation, error) {
	if c.api != nil {
		t, err := c.api.turn(ctx, workflowID)
		if err != nil {
			return nil, err
		}
		out := make([]PendingConfirmation, 0, len(t.Pending))
		for _, p := range t.Pending {
			out = append(out, p.pending())
		}
		return out, nil
	}
	v, err := c.tc.QueryWorkflow(ctx, workflowID, "", workflows.QueryPending)
	if err != nil {
		return nil, fmt.Errorf("client: query the pending confirmations of %s: %w", display.Visible(workflowID), err)
	}
	var out []PendingConfirmation
	if err := v.Get(&out); err != nil {
		return nil, fmt.Errorf("client: decode the pending confirmations of %s: %w", display.Visible(workflowID), err)
	}
	for i := range out {
		p := c.present(ctx, out[i])
		out[i].Presentation = &p
	}
	return out, nil
}

// present is p's Presentation: from the store (votes so far, the user's request, the
// requester) when this client has one, else from what the pending query carried.
func (c *Client) present(ctx context.Context, p PendingConfirmation) Presentation {
	now := time.Now()
	if c.st != nil {
		if row, err := c.st.GetConfirmation(ctx, p.ConfirmationID); err == nil {
			in := present.Input(row)
			in.Now, in.Viewer = now, c.approver
			if in.Quorum == 0 {
				in.Quorum = p.Quorum
			}
			if present.Gather(ctx, c.st, row, &in) == nil {
				return presentation.Build(in)
			}
		}
	}
	in := approval.PendingInput(p)
	in.Now, in.Viewer = now, c.approver
	return presentation.Build(in)
}

// Present is the one presentation of a pending confirmation (the facts the approver page, the
// CLI, the application API and the notices state), built from what p carries when it holds
// none yet: Pending and ListPending fill PendingConfirmation.Presentation already.
func Present(p PendingConfirmation) Presentation {
	if p.Presentation != nil {
		return *p.Presentation
	}
	in := approval.PendingInput(p)
	in.Now = time.Now()
	return presentation.Build(in)
}

// ListFilter narrows ListPending.
type ListFilter struct {
	// Conversation, when set, lists only that conversation's turns.
	Conversation string
}

// ListPending lists the confirmations waiting for a decision across the turns of this
// client's task queue: the open turns Temporal's visibility shows with AirlockStatus
// "awaiting-confirmation" (workflows.QueryAwaiting, newest first; a turn terminated while it
// waited is not listed), each asked with the pending query. Visibility lags
// a turn's status by up to a second or so.
func (c *Client) ListPending(ctx context.Context, f ListFilter) ([]PendingConfirmation, error) {
	if c.api != nil {
		return c.api.listPending(ctx, f)
	}
	q := fmt.Sprintf("%s AND TaskQueue = %s", workflows.QueryAwaiting, quote(c.queue))
	if f.Conversation != "" {
		q += fmt.Sprintf(" AND %s = %s", workflows.AttrConversation.GetName(), quote(f.Conversation))
	}
	var out []PendingConfirmation
	var next []byte
	for {
		resp, err := c.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, NextPageToken: next})
		if err != nil {
			return nil, fmt.Errorf("client: list turns awaiting confirmation: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			ps, err := c.Pending(ctx, e.GetExecution().GetWorkflowId())
			if err != nil {
				continue // the turn ended or moved on since visibility saw it
			}
			out = append(out, ps...)
		}
		if next = resp.GetNextPageToken(); len(next) == 0 {
			return out, nil
		}
	}
}

// quote is a visibility-query string literal.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// DecideRequest is one decision on one pending confirmation.
type DecideRequest struct {
	// ConfirmationID is PendingConfirmation.ConfirmationID.
	ConfirmationID string
	// Decision is Approve or Deny.
	Decision string
	// Reason, for a denial, is what the model is told.
	Reason string
	// ArgsDigest is PendingConfirmation.ArgsDigest of the arguments you showed the approver:
	// a decision on arguments that are no longer the pending ones is refused (ErrStaleDigest).
	// Empty means "whatever is pending".
	ArgsDigest string
}

// Decide signs the decision with the confirmation's token (opened with the approver key),
// attests it with the approver credential and sends it as the turn's decide update, through
// internal/approval like every approver surface. It returns nil when the decision decided the
// confirmation; otherwise a *DecisionError (ErrNotPending: expired, or another decision won,
// named in DecidedBy; ErrRefused; ErrStaleDigest), ErrNotConfigured, or Temporal's error (no
// worker answered before ctx ended).
func (c *Client) Decide(ctx context.Context, r DecideRequest) error {
	if c.api != nil {
		return c.api.decide(ctx, r)
	}
	switch {
	case c.st == nil:
		return fmt.Errorf("%w: Decide needs Options.DatabaseURL (the store holding the sealed token)", ErrNotConfigured)
	case !c.hasKey:
		return fmt.Errorf("%w: Decide needs Options.ApproverKey or ApproverKeyFile", ErrNotConfigured)
	case !c.cred.Valid():
		return fmt.Errorf("%w: Decide needs Options.CredentialFile, an approver credential created by `airlock approvers add NAME` (OptionsFromEnv takes AIRLOCK_CREDENTIAL, else ~/.config/airlock/credential.json when it exists)", ErrNotConfigured)
	}
	req := approval.Request{ConfirmationID: r.ConfirmationID, Decision: r.Decision, Approver: c.approver, Reason: r.Reason,
		ArgsDigest: r.ArgsDigest, Signer: c.cred}
	for attempt := 1; ; attempt++ {
		err := approval.Decide(ctx, c.tc, c.st, c.key, req)
		var ref *approval.RefusedError
		// A presentation by someone else replaced the token this decision was signed with:
		// sign with the fresh one and send once more (as airlock approve does).
		if attempt == 1 && errors.As(err, &ref) && ref.Code == activities.DecisionMACInvalid && ref.Reissued {
			continue
		}
		return decisionError(r.ConfirmationID, err)
	}
}

// decisionError maps internal/approval's errors onto this package's.
func decisionError(id string, err error) error {
	var np *approval.NotPendingError
	var ref *approval.RefusedError
	var stale *approval.StaleError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &np):
		return &DecisionError{ConfirmationID: id, Code: workflows.RefusalNotPending, Detail: np.Detail, Decided: np.Decision,
			DecidedBy: np.Approver, kind: ErrNotPending, cause: err}
	case errors.As(err, &stale):
		return &DecisionError{ConfirmationID: id, Code: activities.StaleDigest, Detail: err.Error(), kind: ErrStaleDigest, cause: err}
	case errors.As(err, &ref):
		kind := ErrRefused
		if ref.Code == activities.StaleDigest {
			kind = ErrStaleDigest
		}
		return &DecisionError{ConfirmationID: id, Code: ref.Code, Detail: ref.Detail, Reissued: ref.Reissued, kind: kind, cause: err}
	case errors.Is(err, approval.ErrNoCredential):
		return fmt.Errorf("%w: %w", ErrNotConfigured, err)
	case errors.Is(err, approval.ErrPasskeyRequired):
		// The capability is decided only with the approver's passkey, on the approver page
		// (issue 21, item 3): nothing was sent.
		return &DecisionError{ConfirmationID: id, Code: activities.PasskeyRequired, Detail: err.Error(), kind: ErrRefused, cause: err}
	}
	return fmt.Errorf("client: decide %s: %w", display.Visible(id), err)
}
