package appapi

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	tclient "go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/identity"
	"github.com/airlock-dev/airlock/internal/present"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/token"
	"github.com/airlock-dev/airlock/presentation"
	"github.com/airlock-dev/airlock/workflows"
)

// OpenAPI is the API's OpenAPI 3.1 description, served at /v1/openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte

// turnWorkflowName is the workflow type workers register TurnWorkflow under.
const turnWorkflowName = "TurnWorkflow"

// Defaults of Options.
const (
	DefaultMaxStreamsPerCaller = 64
	DefaultStreamIdle          = 10 * time.Minute
	DefaultDecideTimeout       = 20 * time.Second
	// MaxBodyBytes bounds a request body.
	MaxBodyBytes = 1 << 20
	// MaxMessageBytes bounds a turn's user message.
	MaxMessageBytes = 64 << 10
)

// Options configure a Server. Store, Temporal, Keys and Starter are required; ApproverKey,
// Surface and Approvers are required for deciding.
type Options struct {
	Store     *store.Store
	Temporal  tclient.Client
	TaskQueue string // "" = workflows.TaskQueue
	Keys      *Keys
	// Starter is the client credential every turn the API starts is attested with; its
	// registration must allow the principals of the API's requesters.
	Starter clients.Credential
	// ApproverKey opens the sealed confirmation tokens; Surface is the approver surface
	// credential that vouches for the API's approvers (registered in the approvers file);
	// Approvers reads the approvers file (groups).
	ApproverKey token.Key
	Surface     approvers.Credential
	Approvers   func() (*approvers.Set, error)
	// MaxStreamsPerCaller bounds a caller's open event streams (DefaultMaxStreamsPerCaller).
	MaxStreamsPerCaller int
	// StreamIdle ends an event stream after this long without an event (DefaultStreamIdle);
	// the client resumes with Last-Event-ID.
	StreamIdle    time.Duration
	DecideTimeout time.Duration
	// AuthBurst failed authentications per client address, refilled one per AuthRefill
	// (defaults 10 and 6 s), before the address is answered 429.
	AuthBurst  int
	AuthRefill time.Duration
	Log        *slog.Logger
	// Access, when set, also accepts the identity provider's access tokens (JWTs; issue 33
	// item 2) as requesters: the caller is the token's principal ("oidc:<claim>"), named by
	// it, and may read only its own turns. Starter's registration must speak for those
	// principals ("oidc:*").
	Access *identity.AccessVerifier
}

// Server is the API's http.Handler. Close it to stop its store listener.
type Server struct {
	opt     Options
	mux     *http.ServeMux
	hub     *hub
	limit   *failureLimiter
	mu      sync.Mutex
	streams map[string]int
	cancel  context.CancelFunc
}

// ErrNotConfigured: a required Option is missing (named).
var ErrNotConfigured = errors.New("appapi: not configured")

// New builds the server and starts its store listener (one LISTEN for all followers).
func New(opt Options) (*Server, error) {
	switch {
	case opt.Store == nil:
		return nil, fmt.Errorf("%w: Store", ErrNotConfigured)
	case opt.Temporal == nil:
		return nil, fmt.Errorf("%w: Temporal", ErrNotConfigured)
	case opt.Keys == nil:
		return nil, fmt.Errorf("%w: Keys", ErrNotConfigured)
	case !opt.Starter.Valid():
		return nil, fmt.Errorf("%w: Starter (a client credential: airlock clients add)", ErrNotConfigured)
	}
	if opt.TaskQueue == "" {
		opt.TaskQueue = workflows.TaskQueue
	}
	if opt.MaxStreamsPerCaller <= 0 {
		opt.MaxStreamsPerCaller = DefaultMaxStreamsPerCaller
	}
	if opt.StreamIdle <= 0 {
		opt.StreamIdle = DefaultStreamIdle
	}
	if opt.DecideTimeout <= 0 {
		opt.DecideTimeout = DefaultDecideTimeout
	}
	if opt.AuthBurst <= 0 {
		opt.AuthBurst = 10
	}
	if opt.AuthRefill <= 0 {
		opt.AuthRefill = 6 * time.Second
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{opt: opt, mux: http.NewServeMux(), hub: newHub(ctx, opt.Store), limit: newFailureLimiter(opt.AuthBurst, opt.AuthRefill),
		streams: map[string]int{}, cancel: cancel}
	s.mux.HandleFunc("GET /v1/openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(OpenAPI)
	})
	s.mux.HandleFunc("POST /v1/turns", s.auth(s.startTurn))
	s.mux.HandleFunc("GET /v1/conversations/{conversation}/turns/{seq}", s.auth(s.getTurn))
	s.mux.HandleFunc("GET /v1/conversations/{conversation}/turns/{seq}/events", s.auth(s.events))
	s.mux.HandleFunc("GET /v1/confirmations", s.auth(s.listConfirmations))
	s.mux.HandleFunc("POST /v1/confirmations/{id}/decision", s.auth(s.decide))
	s.mux.HandleFunc("POST /v1/agui", s.auth(s.agui))
	return s, nil
}

// Close stops the store listener; open streams end with their requests.
func (s *Server) Close() { s.cancel() }

// Polling reports whether followers poll the store (SQLite, or LISTEN unavailable) instead
// of waiting for notifications.
func (s *Server) Polling() bool { return !s.hub.listening }

// ServeHTTP serves the API. Every response says no-store: what it carries is per caller.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	s.mux.ServeHTTP(w, r)
}

// apiError is every error response's body.
type apiError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	_ = enc.Encode(v)
}

func fail(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, apiError{Error: code, Message: msg})
}

type callerKey struct{}

func callerOf(r *http.Request) Caller { c, _ := r.Context().Value(callerKey{}).(Caller); return c }

// auth authenticates the request's API key, answering 401 (and counting a failure against
// the client address) without one that matches, and 429 while the address has no failures
// left.
func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		addr := clientAddr(r)
		if blocked, wait := s.limit.blocked(addr); blocked {
			w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)+1))
			fail(w, http.StatusTooManyRequests, "too_many_failures", "too many failed authentications from this address: retry later")
			return
		}
		key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		key = strings.TrimSpace(key)
		c, found := s.opt.Keys.lookup(key)
		if ok && !found && s.opt.Access != nil && identity.IsJWT(key) {
			if rq, err := s.opt.Access.Verify(r.Context(), key); err == nil {
				c, found = Caller{Name: rq.Principal, Principal: rq.Principal}, true
			} else {
				s.opt.Log.Info("access token refused", "error", err)
			}
		}
		if !ok || !found {
			s.limit.fail(addr)
			w.Header().Set("WWW-Authenticate", `Bearer realm="airlock-api"`)
			fail(w, http.StatusUnauthorized, "unauthorized", "an API key is needed: Authorization: Bearer <key>")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		h(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	}
}

// ConversationPattern is what a conversation name must match in this API (it is a URL path
// segment and part of a turn's workflow id).
var ConversationPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// IdempotencyKeyPattern is what an Idempotency-Key header must match.
var IdempotencyKeyPattern = regexp.MustCompile(`^[\x21-\x7e]{1,128}$`)

// StartRequest is POST /v1/turns's body.
type StartRequest struct {
	// Conversation continues (or starts) this conversation; "" starts a new one.
	Conversation string `json:"conversation,omitempty"`
	// Message is the user's message.
	Message string `json:"message"`
	// Model names the model ("" = the worker's default).
	Model string `json:"model,omitempty"`
}

// Turn is a turn as the API shows it.
type Turn struct {
	ID           string                `json:"id"`
	Conversation string                `json:"conversation"`
	Seq          int                   `json:"seq"`
	Status       string                `json:"status"`
	EventsURL    string                `json:"events_url"`
	Pending      []Confirmation        `json:"pending"`
	Result       *workflows.TurnResult `json:"result,omitempty"`
	Error        string                `json:"error,omitempty"`
}

// Turn statuses beyond workflows' (running, awaiting-confirmation, completed, failed).
const StatusStarting = "starting"

func turnURL(conversation string, seq int) string {
	return fmt.Sprintf("/v1/conversations/%s/turns/%d", conversation, seq)
}

func (s *Server) startTurn(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	if c.Principal == "" {
		fail(w, http.StatusForbidden, "not_a_requester", "this API key may not start turns")
		return
	}
	idem := r.Header.Get("Idempotency-Key")
	if !IdempotencyKeyPattern.MatchString(idem) {
		fail(w, http.StatusBadRequest, "idempotency_key_required", "an Idempotency-Key header (1-128 visible ASCII characters) is required")
		return
	}
	var req StartRequest
	if err := decodeStrict(r.Body, &req); err != nil {
		fail(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	turn, status, err := s.start(r.Context(), c, idem, req)
	if err != nil {
		var he *httpError
		if errors.As(err, &he) {
			fail(w, he.status, he.code, he.msg)
			return
		}
		s.opt.Log.Error("appapi: start a turn", "caller", c.Name, "err", err)
		fail(w, http.StatusBadGateway, "start_failed", "the turn could not be started")
		return
	}
	w.Header().Set("Location", turn.EventsURL[:len(turn.EventsURL)-len("/events")])
	writeJSON(w, status, turn)
}

type httpError struct {
	status    int
	code, msg string
}

func (e *httpError) Error() string { return e.code + ": " + e.msg }

// start starts (or, for a repeated idempotency key, finds) caller c's turn.
func (s *Server) start(ctx context.Context, c Caller, idem string, req StartRequest) (Turn, int, error) {
	if req.Message == "" || len(req.Message) > MaxMessageBytes {
		return Turn{}, 0, &httpError{http.StatusBadRequest, "bad_request", fmt.Sprintf("message must be 1 to %d bytes", MaxMessageBytes)}
	}
	if len(req.Model) > 128 {
		return Turn{}, 0, &httpError{http.StatusBadRequest, "bad_request", "model is longer than 128 bytes"}
	}
	canon, _ := json.Marshal(req)
	sum := sha256.Sum256(canon)
	digest := hex.EncodeToString(sum[:])
	if req.Conversation == "" {
		// A new conversation, named after the caller's key so a repeat names the same one.
		h := sha256.Sum256([]byte(c.Name + "\x00" + idem))
		req.Conversation = "c-" + hex.EncodeToString(h[:12])
	}
	if !ConversationPattern.MatchString(req.Conversation) {
		return Turn{}, 0, &httpError{http.StatusBadRequest, "bad_request", "conversation must match " + ConversationPattern.String()}
	}
	if owner, err := s.opt.Store.ConversationOwner(ctx, req.Conversation); err == nil && owner != c.Principal {
		return Turn{}, 0, &httpError{http.StatusForbidden, "conversation_forbidden", "this conversation belongs to another principal"}
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return Turn{}, 0, err
	}
	for range 100 {
		seq, err := s.opt.Store.NextTurnSeq(ctx, req.Conversation)
		if err != nil {
			return Turn{}, 0, err
		}
		id := workflows.TurnWorkflowID(req.Conversation, seq)
		row, created, err := s.opt.Store.ReserveAPITurn(ctx, store.APITurn{Caller: c.Name, Key: idem, BodySHA256: digest,
			WorkflowID: id, Conversation: req.Conversation, Principal: c.Principal})
		if err != nil {
			return Turn{}, 0, err
		}
		if !created {
			if row.BodySHA256 != digest {
				return Turn{}, 0, &httpError{http.StatusConflict, "idempotency_key_reused", "this Idempotency-Key was used for another request"}
			}
			t, err := s.turnOf(ctx, row.WorkflowID, c)
			return t, http.StatusOK, err
		}
		// Bind the conversation to the principal before the turn exists: two callers racing
		// for one new conversation cannot both start in it.
		owner, err := s.opt.Store.BindConversation(ctx, req.Conversation, c.Principal, id, time.Now())
		if err != nil || owner != c.Principal {
			_ = s.opt.Store.ReleaseAPITurn(ctx, c.Name, idem)
			if err != nil {
				return Turn{}, 0, err
			}
			return Turn{}, 0, &httpError{http.StatusForbidden, "conversation_forbidden", "this conversation belongs to another principal"}
		}
		tr := workflows.TurnRequest{Conversation: req.Conversation, Principal: c.Principal, Message: req.Message, Model: req.Model}
		workflows.SignRequest(s.opt.Starter, &tr, seq, time.Now())
		so := workflows.StartOptions(id, s.opt.TaskQueue, tr)
		so.WorkflowIDReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE
		so.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL
		so.WorkflowExecutionErrorWhenAlreadyStarted = true
		so.StaticSummary = display.Summary(fmt.Sprintf("turn %d of %s", seq, req.Conversation), workflows.SummaryLimit)
		_, err = s.opt.Temporal.ExecuteWorkflow(ctx, so, turnWorkflowName, tr)
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			_ = s.opt.Store.ReleaseAPITurn(ctx, c.Name, idem)
			continue // that number was taken outside the store's count: take the next
		}
		if err != nil {
			_ = s.opt.Store.ReleaseAPITurn(ctx, c.Name, idem)
			return Turn{}, 0, fmt.Errorf("start turn %s: %w", id, err)
		}
		return Turn{ID: id, Conversation: req.Conversation, Seq: seq, Status: workflows.StatusRunning,
			EventsURL: turnURL(req.Conversation, seq) + "/events", Pending: []Confirmation{}}, http.StatusCreated, nil
	}
	return Turn{}, 0, errors.New("100 consecutive turn ids already exist in Temporal")
}

func decodeStrict(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("the body is not the JSON this endpoint takes: %s", display.Visible(err.Error()))
	}
	if dec.More() {
		return errors.New("the body holds more than one JSON value")
	}
	return nil
}

// turnID resolves the path's turn for caller c: 404 at once for a turn the store does not
// know or that acts for another principal (the caller learns nothing of other principals'
// turns).
func (s *Server) turnID(w http.ResponseWriter, r *http.Request) (string, bool) {
	c := callerOf(r)
	conv := r.PathValue("conversation")
	seq, err := strconv.Atoi(r.PathValue("seq"))
	if !ConversationPattern.MatchString(conv) || err != nil || seq < 1 {
		fail(w, http.StatusNotFound, "not_found", "no such turn")
		return "", false
	}
	id := workflows.TurnWorkflowID(conv, seq)
	owner, err := s.opt.Store.TurnOwner(r.Context(), id)
	if err != nil || c.Principal == "" || owner != c.Principal {
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			s.opt.Log.Error("appapi: turn owner", "err", err)
			fail(w, http.StatusServiceUnavailable, "store_unavailable", "the store did not answer")
			return "", false
		}
		fail(w, http.StatusNotFound, "not_found", "no such turn")
		return "", false
	}
	return id, true
}

func (s *Server) getTurn(w http.ResponseWriter, r *http.Request) {
	id, ok := s.turnID(w, r)
	if !ok {
		return
	}
	t, err := s.turnOf(r.Context(), id, callerOf(r))
	if err != nil {
		s.opt.Log.Error("appapi: turn status", "turn", id, "err", err)
		fail(w, http.StatusBadGateway, "status_unavailable", "the turn's status could not be read")
		return
	}
	writeJSON(w, http.StatusOK, t)
}

// turnOf reads the turn's status from Temporal, its pending confirmations from the store and,
// once it completed, its result.
func (s *Server) turnOf(ctx context.Context, id string, c Caller) (Turn, error) {
	conv, seq := splitTurnID(id)
	t := Turn{ID: id, Conversation: conv, Seq: seq, EventsURL: turnURL(conv, seq) + "/events", Pending: []Confirmation{}}
	d, err := s.opt.Temporal.DescribeWorkflow(ctx, id, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		t.Status = StatusStarting
		return t, nil
	case err != nil:
		return t, err
	}
	desc := d.RawResponse
	status := desc.GetWorkflowExecutionInfo().GetStatus()
	if status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		// The final event is written just before the workflow returns: a client that saw it
		// and asks at once gets the result, not "running".
		if ended, err := s.opt.Store.StreamEnded(ctx, id); err == nil && ended {
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := s.opt.Temporal.GetWorkflow(wctx, id, "").Get(wctx, nil)
			cancel()
			if err == nil {
				status = enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
			} else if wctx.Err() == nil {
				status = enumspb.WORKFLOW_EXECUTION_STATUS_FAILED
			}
		}
	}
	switch status {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		t.Status = workflows.StatusRunning
		rows, err := s.opt.Store.ListTurnConfirmations(ctx, id)
		if err != nil {
			return t, err
		}
		set, _ := s.approvers()
		now := time.Now()
		for _, row := range rows {
			if row.Decision == "" && now.Before(row.ExpiresAt) {
				t.Pending = append(t.Pending, s.confirmation(ctx, row, c, c.Principal, set))
			}
		}
		if len(t.Pending) > 0 {
			t.Status = workflows.StatusAwaitingConfirmation
		}
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		t.Status = workflows.StatusCompleted
		var res workflows.TurnResult
		gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := s.opt.Temporal.GetWorkflow(gctx, id, "").Get(gctx, &res); err != nil {
			return t, err
		}
		t.Result = &res
	default:
		// The API's status stays within its five values; the error names how the run ended
		// in the words every other surface uses (workflows.TurnStatus: "terminated",
		// "timed_out", "canceled", "failed").
		t.Status = workflows.StatusFailed
		t.Error = workflows.TurnStatus(status, "")
	}
	return t, nil
}

// splitTurnID splits "turn/<conversation>/<seq>".
func splitTurnID(id string) (string, int) {
	rest := strings.TrimPrefix(id, "turn/")
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return rest, 0
	}
	n, _ := strconv.Atoi(rest[i+1:])
	return rest[:i], n
}

// Confirmation is a pending confirmation as the API shows it: never its token. Arguments and
// Display were written by a model: hostile, to be shown escaped.
type Confirmation struct {
	ID             string          `json:"id"`
	TurnID         string          `json:"turn_id"`
	Conversation   string          `json:"conversation"`
	Seq            int             `json:"seq"`
	CallID         string          `json:"call_id,omitempty"`
	Capability     string          `json:"capability"`
	Version        int             `json:"version"`
	ArgsDigest     string          `json:"args_digest"`
	Arguments      json.RawMessage `json:"arguments,omitempty"`
	Display        string          `json:"display"`
	ExpiresAt      time.Time       `json:"expires_at"`
	ApproverGroups []string        `json:"approver_groups"`
	// MayDecide says whether this caller may decide it; WhoMayDecide says who may, in words.
	MayDecide    bool   `json:"may_decide"`
	WhoMayDecide string `json:"who_may_decide"`
	// Presentation is the one presentation every approver surface shares (package
	// presentation): the user's request, requester, quorum with votes so far, destination,
	// provenance, status for this caller, every hostile string made visible.
	Presentation presentation.Confirmation `json:"presentation"`
}

func (s *Server) approvers() (*approvers.Set, error) {
	if s.opt.Approvers == nil {
		return nil, fmt.Errorf("%w: Approvers", ErrNotConfigured)
	}
	return s.opt.Approvers()
}

// mayDecide reports whether c may decide row (whose turn acts for owner): an approver in one
// of the row's groups (or any approver when it names none), who is not the turn's requester.
func (s *Server) mayDecide(row store.Confirmation, c Caller, owner string, set *approvers.Set) (bool, string) {
	switch {
	case c.Approver == "":
		return false, "this API key is not an approver's"
	case set == nil || !set.Has(c.Approver):
		return false, "the approvers file does not list this key's approver"
	case c.Principal != "" && c.Principal == owner:
		return false, "the requester of a turn never approves its own calls (four-eyes)"
	case !set.Eligible(c.Approver, row.ApproverGroups):
		return false, "this approver is in none of the confirmation's approver groups"
	case row.PasskeyRequired:
		return false, "decided only with a passkey, on the approver page"
	}
	return true, ""
}

func (s *Server) confirmation(ctx context.Context, row store.Confirmation, c Caller, owner string, set *approvers.Set) Confirmation {
	conv, seq := splitTurnID(row.WorkflowID)
	out := Confirmation{ID: row.ID, TurnID: row.WorkflowID, Conversation: conv, Seq: seq, CallID: display.Visible(row.CallID), Capability: row.CapabilityID,
		Version: row.Version, ArgsDigest: row.ArgsDigest, Arguments: display.JSON(row.Arguments), Display: display.Text(row.Display), ExpiresAt: row.ExpiresAt.UTC(),
		ApproverGroups: row.ApproverGroups}
	if out.ApproverGroups == nil {
		out.ApproverGroups = []string{}
	}
	if len(out.Arguments) == 0 || !json.Valid(out.Arguments) {
		out.Arguments = nil
	}
	out.MayDecide, _ = s.mayDecide(row, c, owner, set)
	out.WhoMayDecide = whoMayDecide(row)
	var err error
	if out.Presentation, err = present.Present(ctx, s.opt.Store, row, c.Approver, time.Now()); err != nil {
		s.opt.Log.Warn("appapi: present a confirmation", "confirmation", row.ID, "err", err)
	}
	return out
}

// whoMayDecide says who may decide row, in words.
func whoMayDecide(row store.Confirmation) string {
	who := "an approver other than the turn's requester"
	if len(row.ApproverGroups) > 0 {
		who += " in approver group " + strings.Join(row.ApproverGroups, " or ")
	}
	if row.PasskeyRequired {
		who += ", with a passkey on the approver page"
	}
	return who
}

// ConfirmationList is GET /v1/confirmations's body.
type ConfirmationList struct {
	Confirmations []Confirmation `json:"confirmations"`
}

func (s *Server) listConfirmations(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	if c.Approver == "" {
		fail(w, http.StatusForbidden, "not_an_approver", "this API key is not an approver's")
		return
	}
	set, err := s.approvers()
	if err != nil {
		fail(w, http.StatusServiceUnavailable, "approvers_unavailable", "the approvers file could not be read")
		return
	}
	f := store.UndecidedFilter{EligibleGroups: store.Eligible(set.GroupsOf(c.Approver))}
	if conv := r.URL.Query().Get("conversation"); conv != "" {
		f.Conversation = conv
	}
	rows, err := s.opt.Store.ListUndecidedPage(r.Context(), f, 200, 0)
	if err != nil {
		fail(w, http.StatusServiceUnavailable, "store_unavailable", "the store did not answer")
		return
	}
	out := ConfirmationList{Confirmations: []Confirmation{}}
	now := time.Now()
	for _, row := range rows {
		if !now.Before(row.ExpiresAt) {
			continue
		}
		owner, _ := s.opt.Store.TurnOwner(r.Context(), row.WorkflowID)
		cf := s.confirmation(r.Context(), row, c, owner, set)
		if !cf.MayDecide && c.Principal != "" && owner == c.Principal {
			continue // its own turn's call: not this approver's to see as a decision
		}
		out.Confirmations = append(out.Confirmations, cf)
	}
	writeJSON(w, http.StatusOK, out)
}

// DecisionRequest is POST /v1/confirmations/{id}/decision's body.
type DecisionRequest struct {
	// Decision is "approve" or "deny".
	Decision string `json:"decision"`
	// Reason is what the model is told of a denial (required for one).
	Reason string `json:"reason,omitempty"`
	// ArgsDigest is the args_digest of the arguments the approver was shown: a decision on
	// other arguments is refused (stale_digest).
	ArgsDigest string `json:"args_digest"`
	// RepeatCount and RepeatMinutes, on an approval only, also approve the next RepeatCount
	// identical calls (same capability and argument digest, same principal, same
	// conversation) within RepeatMinutes minutes: a repeat grant (issue 37, item 4; 1 to
	// activities.MaxRepeatCalls calls, 1 to activities.MaxRepeatMinutes minutes, both or
	// neither). A call that needs more than one approval takes none (422
	// repeat_grant_refused).
	RepeatCount   int `json:"repeat_count,omitempty"`
	RepeatMinutes int `json:"repeat_minutes,omitempty"`
}

// DecisionResponse is the answer to a decision that the turn accepted (or counted).
type DecisionResponse struct {
	ConfirmationID string `json:"confirmation_id"`
	Decision       string `json:"decision"`
	Approver       string `json:"approver"`
	// Status is "decided", or "counted" when the approval counts towards a quorum.
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}

func (s *Server) decide(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	var req DecisionRequest
	if err := decodeStrict(r.Body, &req); err != nil {
		fail(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	resp, err := s.decideAs(r.Context(), c, r.PathValue("id"), req)
	if err != nil {
		var he *httpError
		if errors.As(err, &he) {
			fail(w, he.status, he.code, he.msg)
			return
		}
		fail(w, http.StatusBadGateway, "decide_failed", "the decision could not be delivered")
		return
	}
	status := http.StatusOK
	if resp.Status == "counted" {
		status = http.StatusAccepted
	}
	writeJSON(w, status, resp)
}

// decideAs signs and delivers c's decision on confirmation id (internal/approval), mapping
// every outcome onto an HTTP status.
func (s *Server) decideAs(ctx context.Context, c Caller, id string, req DecisionRequest) (DecisionResponse, error) {
	notFound := &httpError{http.StatusNotFound, "not_found", "no such confirmation"}
	if c.Approver == "" {
		return DecisionResponse{}, &httpError{http.StatusForbidden, "not_an_approver", "this API key is not an approver's"}
	}
	switch req.Decision {
	case workflows.DecisionApprove:
	case workflows.DecisionDeny:
		if strings.TrimSpace(req.Reason) == "" {
			return DecisionResponse{}, &httpError{http.StatusBadRequest, "bad_request", "a denial needs a reason: the model receives it"}
		}
	default:
		return DecisionResponse{}, &httpError{http.StatusBadRequest, "bad_request", `decision must be "approve" or "deny"`}
	}
	if req.ArgsDigest == "" {
		return DecisionResponse{}, &httpError{http.StatusBadRequest, "bad_request", "args_digest (of the arguments shown) is required"}
	}
	if req.RepeatCount != 0 || req.RepeatMinutes != 0 {
		if req.Decision != workflows.DecisionApprove || req.RepeatCount < 1 || req.RepeatCount > activities.MaxRepeatCalls ||
			req.RepeatMinutes < 1 || req.RepeatMinutes > activities.MaxRepeatMinutes {
			return DecisionResponse{}, &httpError{http.StatusBadRequest, "bad_request", fmt.Sprintf(
				"a repeat grant goes with an approval: repeat_count 1 to %d and repeat_minutes 1 to %d, both together", activities.MaxRepeatCalls, activities.MaxRepeatMinutes)}
		}
	}
	if len(req.Reason) > approval.MaxReasonBytes {
		return DecisionResponse{}, &httpError{http.StatusBadRequest, "bad_request", fmt.Sprintf("reason is longer than %d bytes", approval.MaxReasonBytes)}
	}
	row, err := s.opt.Store.GetConfirmation(ctx, id)
	if err != nil {
		return DecisionResponse{}, notFound
	}
	set, err := s.approvers()
	if err != nil {
		return DecisionResponse{}, &httpError{http.StatusServiceUnavailable, "approvers_unavailable", "the approvers file could not be read"}
	}
	owner, _ := s.opt.Store.TurnOwner(ctx, row.WorkflowID)
	if ok, why := s.mayDecide(row, c, owner, set); !ok {
		if c.Principal != "" && owner == c.Principal {
			return DecisionResponse{}, &httpError{http.StatusForbidden, activities.ApproverIsRequester, why}
		}
		if row.PasskeyRequired && set.Eligible(c.Approver, row.ApproverGroups) {
			return DecisionResponse{}, &httpError{http.StatusForbidden, activities.PasskeyRequired, why}
		}
		return DecisionResponse{}, notFound // not this approver's to see
	}
	dctx, cancel := context.WithTimeout(ctx, s.opt.DecideTimeout)
	defer cancel()
	areq := approval.Request{ConfirmationID: id, Decision: req.Decision, Approver: c.Approver, Reason: strings.TrimSpace(req.Reason),
		ArgsDigest: req.ArgsDigest, Signer: s.opt.Surface, RepeatCount: req.RepeatCount, RepeatMinutes: req.RepeatMinutes}
	for attempt := 1; ; attempt++ {
		err = approval.Decide(dctx, s.opt.Temporal, s.opt.Store, s.opt.ApproverKey, areq)
		var ref *approval.RefusedError
		if attempt == 1 && errors.As(err, &ref) && ref.Code == activities.DecisionMACInvalid && ref.Reissued {
			continue // another presentation replaced the token: sign with the fresh one once
		}
		break
	}
	resp := DecisionResponse{ConfirmationID: id, Decision: req.Decision, Approver: c.Approver, Status: "decided"}
	var np *approval.NotPendingError
	var ref *approval.RefusedError
	var stale *approval.StaleError
	switch {
	case err == nil:
		return resp, nil
	case errors.As(err, &stale):
		return resp, &httpError{http.StatusConflict, activities.StaleDigest, "the arguments changed since they were shown: read the confirmation again"}
	case errors.As(err, &np):
		return resp, &httpError{http.StatusConflict, workflows.RefusalNotPending, display.Visible(np.Error())}
	case errors.As(err, &ref) && ref.Code == activities.QuorumPending:
		resp.Status, resp.Detail = "counted", display.Visible(ref.Detail)
		return resp, nil
	case errors.As(err, &ref):
		return resp, &httpError{http.StatusUnprocessableEntity, ref.Code, display.Visible(ref.Error())}
	case errors.Is(err, approval.ErrPasskeyRequired):
		return resp, &httpError{http.StatusForbidden, activities.PasskeyRequired, "decided only with a passkey, on the approver page"}
	case errors.Is(err, context.DeadlineExceeded):
		return resp, &httpError{http.StatusGatewayTimeout, "no_verdict", "the turn did not judge the decision in time (is a worker running?)"}
	}
	s.opt.Log.Error("appapi: decide", "confirmation", id, "err", err)
	return resp, err
}

// openStream counts a caller's stream, false when it has MaxStreamsPerCaller open.
func (s *Server) openStream(c Caller) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams[c.Name] >= s.opt.MaxStreamsPerCaller {
		return false
	}
	s.streams[c.Name]++
	return true
}

func (s *Server) closeStream(c Caller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams[c.Name]--; s.streams[c.Name] <= 0 {
		delete(s.streams, c.Name)
	}
}
