package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/passkey"
	"github.com/airlock-dev/airlock/internal/present"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/presentation"
	"github.com/airlock-dev/airlock/workflows"
)

// maxPasswordLen bounds a password before bcrypt sees it (bcrypt uses 72 bytes).
const maxPasswordLen = 1024

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "login", "Sign in", "")
}

// login checks name and password against the approvers file, rate limited per name and per
// client address; success starts a session and sets its cookie.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		s.render(w, r, http.StatusBadRequest, "login", "Sign in", "The form could not be read.")
		return
	}
	name, password := strings.TrimSpace(r.PostForm.Get("name")), r.PostForm.Get("password")
	keys := []string{userKey(name), ipKey(clientIP(r))}
	at, blocked, wait := s.limiter.Attempt(keys...)
	if blocked {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
		s.opt.Log.Warn("web: sign-in rate limited", "client", clientIP(r))
		s.render(w, r, http.StatusTooManyRequests, "login", "Sign in",
			fmt.Sprintf("Too many failed sign-ins: try again in %d s.", int(wait.Seconds())+1))
		return
	}
	set, err := s.opt.Approvers()
	if err != nil {
		s.limiter.Forgive(at, keys...) // not the sign-in's fault
		s.opt.Log.Error("web: read the approvers file", "err", err)
		s.render(w, r, http.StatusInternalServerError, "login", "Sign in", "The approvers file could not be read: see the server's log.")
		return
	}
	approver := ""
	if len(password) <= maxPasswordLen && name != "" {
		approver, err = set.Authenticate(name, password)
	} else {
		err = errors.New("web: empty name or overlong password")
	}
	if err != nil || approver == "" {
		s.render(w, r, http.StatusUnauthorized, "login", "Sign in", "Unknown approver or wrong password.")
		return
	}
	s.limiter.Forgive(at, keys...)
	// A sign-in always starts a fresh session (never one whose id the browser brought: no
	// fixation), and ends the one the browser is replacing, so signing in as someone else on
	// a shared browser signs the previous approver out instead of leaving their session live
	// for whoever copied its cookie.
	if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" {
		if err := s.sessions.remove(r.Context(), c.Value); err != nil {
			s.fail(w, r, http.StatusInternalServerError, "could not end the previous session (the store did not answer); try again", err)
			return
		}
	}
	id, err := s.sessions.create(r.Context(), approver, stampOf(set, approver))
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "could not start a session", err)
		return
	}
	http.SetCookie(w, sessionCookie(id, int(SessionMax.Seconds())))
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if err := s.sessions.remove(r.Context(), current(r).id); err != nil {
		s.fail(w, r, http.StatusInternalServerError, "could not end the session (the store did not answer); try again", err)
		return
	}
	http.SetCookie(w, sessionCookie("", -1))
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// card is one confirmation as the page shows it, with its decision forms while undecided.
type card struct {
	ID            string
	WorkflowID    shown
	WorkflowIDRaw string
	TurnLink      string
	TemporalURL   string
	Conversation  shown
	Principal     shown
	Tool          shown
	Capability    string
	Version       int
	Seq           int
	Fields        []field
	Literal       shown
	Leaves        []leave
	Origins       []origin
	Disclosure    *disclosed
	ArgsDigest    string
	Edit          string
	CreatedAt     time.Time
	ExpiresAt     time.Time
	Expired       bool
	Decision      string
	DecidedAt     *time.Time
	CSRF          string
	Approver      shown
	Reason        shown
	Earlier       []event
	// Passkey: a decision counts only with the approver's passkey (the page asks the
	// authenticator to sign it; policy "approval/passkey").
	Passkey bool
	// P is the presentation every surface shares; the fields below are read from it.
	P presentation.Confirmation
	// UserRequest is the turn's user message that asked; Deciders and QuorumLine who may
	// decide and the votes so far ("2 needed, 1 so far (erin)").
	UserRequest          shown
	Deciders, QuorumLine string
	// Status is the status in plain words (presentation.Confirmation.StatusLine), State and
	// Outcome its words (pending, voted, approved, denied, expired; executed, failed, …).
	Status, State, Outcome string
	// Voted: the viewer's approval counted and more are needed: no Approve for them.
	Voted bool
	// Editable: an edit can be decided (a quorum of more than one approval refuses edits).
	Editable bool
}

// event is one audit row as the page shows it.
type event struct {
	At         time.Time
	WorkflowID shown
	TurnLink   string
	Seq        int
	Capability string
	Version    int
	Outcome    string
	Stage      string
	Reason     shown
	Detail     shown
	Approver   shown
}

// conversationOf is the conversation of a turn workflow id "turn/<conversation>/<seq>".
func conversationOf(workflowID string) string {
	s := strings.TrimPrefix(workflowID, "turn/")
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[:i]
	}
	return s
}

func turnLink(workflowID string) string { return "/turn?id=" + url.QueryEscape(workflowID) }

// card is c as the page shows it for the signed-in approver: every fact comes from the one
// presentation every surface shares (approval.Present: capability, description, destination,
// arguments, provenance, the user's request, requester, groups and quorum with votes, expiry,
// status); the page adds its forms. principal is what Temporal says the turn's starter named
// (shown as not attested when the store knows no attested requester); evs, when set, are the
// turn's audit rows (the outcome of a decided call is read from them, else from the store).
func (s *Server) card(r *http.Request, c store.Confirmation, principal string, now time.Time, evs []store.AuditEvent) card {
	me := current(r).session.approver
	in := present.Input(c)
	in.Viewer, in.Now, in.Limit, in.ClaimedPrincipal = me, now, fieldLimit, claimed(principal)
	if evs != nil {
		// Gather would read the audit again: the caller read this turn's already.
		gc := c
		gc.Decision = ""
		if err := present.Gather(r.Context(), s.opt.Store, gc, &in); err != nil {
			s.opt.Log.Warn("web: read a confirmation's votes", "confirmation", c.ID, "err", err)
		}
		if c.Decision == store.DecisionApproved {
			in.Outcome = present.OutcomeOf(evs, c)
		}
	} else if err := present.Gather(r.Context(), s.opt.Store, c, &in); err != nil {
		s.opt.Log.Warn("web: read a confirmation's votes", "confirmation", c.ID, "err", err)
	}
	p := presentation.Build(in)
	out := card{CSRF: current(r).csrf, DecidedAt: c.DecidedAt, P: p,
		ID: c.ID, WorkflowID: shownOf(p.TurnID), WorkflowIDRaw: c.WorkflowID, TurnLink: turnLink(c.WorkflowID),
		TemporalURL: s.opt.WorkflowURL(c.WorkflowID), Conversation: show(conversationOf(c.WorkflowID), fieldLimit),
		Principal: requesterShown(p.Requester), Tool: shownOf(p.Tool), Capability: p.Capability,
		Version: p.Version, Seq: p.Seq, Literal: show(string(c.Arguments), literalLimit),
		ArgsDigest: c.ArgsDigest, Edit: editable(c.Arguments),
		CreatedAt: c.CreatedAt, ExpiresAt: c.ExpiresAt, Expired: p.Status.State == presentation.StateExpired,
		Decision: c.Decision, Passkey: p.PasskeyRequired,
		UserRequest: shownOf(p.UserRequest), Deciders: p.Quorum.Deciders(), QuorumLine: p.Quorum.Line(),
		Status: p.StatusLine(), State: p.Status.State, Outcome: p.Status.Outcome,
		Voted: p.Status.State == presentation.StateVoted, Editable: p.Quorum.Needed <= 1,
	}
	if p.Status.DecidedBy != nil {
		out.Approver = shownOf(*p.Status.DecidedBy)
	}
	if p.Status.Reason != nil {
		out.Reason = shownOf(*p.Status.Reason)
	}
	for _, f := range p.Arguments {
		out.Fields = append(out.Fields, field{Name: shown{Text: f.Path}, Value: shownOf(f.Value)})
	}
	if p.Destination.Guessed {
		for _, l := range p.Destination.Sends {
			out.Leaves = append(out.Leaves, leave{Kind: l.Kind, Name: shown{Text: l.Path}, Value: shownOf(l.Value)})
		}
	} else if p.Destination.Line != "unknown" {
		out.Disclosure = disclosedOf(p)
	}
	for _, o := range p.Provenance {
		out.Origins = append(out.Origins, origin{Path: shown{Text: o.Path}, Label: shownOf(o.Label), Untrusted: o.UntrustedOnly, Unattributed: o.Unattributed})
	}
	return out
}

// claimed is the principal Temporal's search attribute names, without the page's notes.
func claimed(principal string) string {
	p, _, _ := strings.Cut(principal, " · ")
	return p
}

// requesterShown is the requester line of the card ("alice · attested by client app").
func requesterShown(r presentation.Requester) shown {
	if r.Principal.Text == "" {
		return shown{}
	}
	out := shownOf(r.Principal)
	if r.Attested {
		out.Text += " · attested by client " + r.Client.Text
		out.Flags = append(out.Flags, r.Client.Flags...)
	} else {
		out.Text += " · NOT attested (the turn's request did not prove it)"
	}
	return out
}

func (s *Server) event(e store.AuditEvent) event {
	return event{At: e.At, WorkflowID: show(e.WorkflowID, fieldLimit), TurnLink: turnLink(e.WorkflowID), Seq: e.Seq,
		Capability: e.CapabilityID, Version: e.Version, Outcome: e.Outcome, Stage: e.Stage,
		Reason: show(e.Reason, fieldLimit), Detail: show(e.Detail, fieldLimit), Approver: show(e.Approver, fieldLimit)}
}

// turnInfo is what Temporal says about a turn: its principal and status ("" when unknown).
type turnInfo struct{ Principal, Status string }

func (s *Server) turnInfo(ctx context.Context, workflowID string) turnInfo {
	ti := s.temporalInfo(ctx, workflowID)
	// The requester the worker proved from the turn's attestation (issue 21); the search
	// attribute is only what the starter wrote, so it is shown as a claim.
	if rq, err := s.opt.Store.GetRequester(ctx, workflowID, ""); err == nil {
		ti.Principal = rq.Principal + " · attested by client " + rq.Client
	} else if ti.Principal != "" {
		ti.Principal += " · NOT attested (the turn's request did not prove it)"
	}
	return ti
}

// temporalInfo is what Temporal says about a turn: the principal its starter named, and its
// status.
func (s *Server) temporalInfo(ctx context.Context, workflowID string) turnInfo {
	if s.opt.Temporal == nil {
		return turnInfo{}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d, err := s.opt.Temporal.DescribeWorkflow(ctx, workflowID, "")
	if err != nil {
		return turnInfo{}
	}
	var ti turnInfo
	ti.Principal, _ = d.TypedSearchAttributes.GetKeyword(workflows.AttrPrincipal)
	ti.Principal = strings.TrimSpace(ti.Principal)
	attr, _ := d.TypedSearchAttributes.GetKeyword(workflows.AttrStatus)
	ti.Status = workflows.TurnStatus(d.RawResponse.GetWorkflowExecutionInfo().GetStatus(), attr)
	return ti
}

// group is the pending cards of one turn and model message (round), shown together.
type group struct {
	WorkflowID  shown
	TurnLink    string
	TemporalURL string
	Cards       []card
	Earlier     []event
}

type inboxData struct {
	Conversation, Capability string
	Groups                   []group
	// Total counts every undecided confirmation, Matching those the filters keep; the page
	// shows the Matching ones From..To (1-based; To < From when there are none).
	Total, Matching, From, To int
	// Prev and Next link the neighbouring pages ("" at either end).
	Prev, Next string
	// Version is store.ConfirmationsVersion read before the rows: the live inbox (live.go)
	// fetches the page again only when the stream reports another one.
	Version string
}

// InboxPageSize is how many confirmations one inbox page shows: the page reads and renders
// only these (with each one's turn and its earlier outcomes), however many are undecided.
const InboxPageSize = 50

// inboxLookups bounds the turns an inbox page looks up at once (Temporal and the store).
const inboxLookups = 8

// inboxPage is the 1-based page number of the request's "page" parameter (1 when absent or
// not a positive number).
func inboxPage(q url.Values) int {
	if n, err := strconv.Atoi(q.Get("page")); err == nil && n > 0 {
		return n
	}
	return 1
}

// inboxLink is the inbox URL of page n under the given filters.
func inboxLink(conversation, capability string, n int) string {
	v := url.Values{}
	if conversation != "" {
		v.Set("conversation", conversation)
	}
	if capability != "" {
		v.Set("capability", capability)
	}
	if n > 1 {
		v.Set("page", strconv.Itoa(n))
	}
	if len(v) == 0 {
		return "/"
	}
	return "/?" + v.Encode()
}

// GroupsOf is what an Authenticator may also offer: the approver groups of an approver
// (approvers.Set does), which limit the inbox to what they may decide.
type GroupsOf interface {
	GroupsOf(approver string) []string
}

// eligibleGroups is the inbox's store.UndecidedFilter.EligibleGroups for approver: "" (no
// narrowing) when the approvers file offers no groups, else their groups.
func (s *Server) eligibleGroups(approver string) string {
	set, err := s.opt.Approvers()
	if err != nil {
		return store.NoGroups
	}
	g, ok := set.(GroupsOf)
	if !ok {
		return ""
	}
	return store.Eligible(g.GroupsOf(approver))
}

// inbox lists undecided confirmations across turns, newest first, filtered by conversation
// and capability, InboxPageSize at a time; the calls of one turn are grouped with the turn's
// earlier outcomes.
func (s *Server) inbox(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	data := inboxData{Conversation: q.Get("conversation"), Capability: q.Get("capability")}
	// Only what the signed-in approver may decide (issue 21): their groups against each
	// confirmation's approver groups.
	all := store.UndecidedFilter{EligibleGroups: s.eligibleGroups(current(r).session.approver)}
	f := all
	f.Conversation, f.CapabilityID = data.Conversation, data.Capability
	page := inboxPage(q)
	var err error
	data.Version, _ = s.opt.Store.ConfirmationsVersion(ctx) // "" on error: the stream's first event refreshes
	if data.Total, err = s.opt.Store.CountUndecided(ctx, all); err == nil {
		data.Matching = data.Total
		if f != all {
			data.Matching, err = s.opt.Store.CountUndecided(ctx, f)
		}
	}
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "could not count the pending confirmations", err)
		return
	}
	if last := max(1, (data.Matching+InboxPageSize-1)/InboxPageSize); page > last {
		page = last // past the end (the list shrank): the last page
	}
	rows, err := s.opt.Store.ListUndecidedPage(ctx, f, InboxPageSize, (page-1)*InboxPageSize)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "could not read the pending confirmations", err)
		return
	}
	data.From, data.To = (page-1)*InboxPageSize+1, (page-1)*InboxPageSize+len(rows)
	if page > 1 {
		data.Prev = inboxLink(data.Conversation, data.Capability, page-1)
	}
	if data.To < data.Matching {
		data.Next = inboxLink(data.Conversation, data.Capability, page+1)
	}
	now := s.opt.Now()
	index := map[string]int{}
	for _, c := range rows {
		if _, ok := index[c.WorkflowID]; !ok {
			index[c.WorkflowID] = len(data.Groups)
			data.Groups = append(data.Groups, group{WorkflowID: show(c.WorkflowID, fieldLimit), TurnLink: turnLink(c.WorkflowID),
				TemporalURL: s.opt.WorkflowURL(c.WorkflowID)})
		}
	}
	// Each turn's principal (Temporal) and earlier outcomes (the store), a few turns at once.
	infos := make([]turnInfo, len(data.Groups))
	var wg sync.WaitGroup
	sem := make(chan struct{}, inboxLookups)
	for id, i := range index {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			infos[i] = s.turnInfo(ctx, id)
			if evs, err := s.opt.Store.ListAudit(ctx, id); err == nil {
				for _, e := range evs {
					data.Groups[i].Earlier = append(data.Groups[i].Earlier, s.event(e))
				}
			}
		}()
	}
	wg.Wait()
	for _, c := range rows {
		i := index[c.WorkflowID]
		data.Groups[i].Cards = append(data.Groups[i].Cards, s.card(r, c, infos[i].Principal, now, nil))
	}
	s.render(w, r, http.StatusOK, "inbox", "Pending decisions", data)
}

type turnData struct {
	WorkflowID  shown
	Raw         string
	TemporalURL string
	Info        turnInfo
	Principal   shown
	Answer      *answer
	AnswerText  shown
	Pending     []card
	Decided     []card
	Events      []event
	Result      *workflows.TurnResult
	Prose       shown
	Outcomes    []outcomeView
	Results     []resultView
	Running     bool
}

type outcomeView struct {
	Seq       int
	Round     int
	Name      shown
	Cap       string
	Version   int
	Outcome   string
	Stage     string
	Reason    shown
	Detail    shown
	Approver  shown
	Arguments shown
	// Origin is "model" or "approver" (an approver's edit); EditOf the proposal it replaced.
	Origin string
	EditOf int
}

type resultView struct {
	Seq        int
	Capability string
	Version    int
	Data       shown
	Error      shown
}

// turn is one turn's page: its pending confirmations (with forms), decided ones, audit trail
// and, once it ended, its result.
func (s *Server) turn(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.URL.Query().Get("id")
	if id == "" {
		s.fail(w, r, http.StatusBadRequest, "which turn? (/turn?id=WORKFLOW-ID)", nil)
		return
	}
	rows, err := s.opt.Store.ListTurnConfirmations(ctx, id)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "could not read the turn's confirmations", err)
		return
	}
	evs, err := s.opt.Store.ListAudit(ctx, id)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "could not read the turn's audit", err)
		return
	}
	info := s.turnInfo(ctx, id)
	d := turnData{WorkflowID: show(id, fieldLimit), Raw: id, TemporalURL: s.opt.WorkflowURL(id), Info: info, Principal: show(info.Principal, fieldLimit)}
	if a := current(r).lastAnswer; a != nil && a.WorkflowID == id {
		d.Answer, d.AnswerText = a, show(a.Text, literalLimit)
	}
	now := s.opt.Now()
	for _, c := range rows {
		if c.Decision == "" {
			d.Pending = append(d.Pending, s.card(r, c, info.Principal, now, evs))
		} else {
			d.Decided = append(d.Decided, s.card(r, c, info.Principal, now, evs))
		}
	}
	for _, e := range evs {
		d.Events = append(d.Events, s.event(e))
	}
	if raw, err := s.opt.Store.GetTurnResult(ctx, id); err == nil {
		var res workflows.TurnResult
		if json.Unmarshal(raw, &res) == nil {
			d.Result = &res
			d.Prose = show(res.Prose, 2000)
			for _, o := range res.Outcomes {
				d.Outcomes = append(d.Outcomes, outcomeView{Seq: o.Seq, Round: o.Round, Name: show(o.Name, fieldLimit), Cap: o.CapabilityID,
					Version: o.Version, Outcome: string(o.Outcome), Stage: string(o.Stage), Reason: show(o.Reason, fieldLimit),
					Detail: show(o.Detail, fieldLimit), Approver: show(o.Approver, fieldLimit), Arguments: show(string(o.Arguments), literalLimit),
					Origin: o.Origin, EditOf: o.EditOf})
			}
			for _, x := range res.Results {
				d.Results = append(d.Results, resultView{Seq: x.Seq, Capability: x.CapabilityID, Version: x.Version,
					Data: show(string(x.Data), literalLimit), Error: show(x.Error, fieldLimit)})
			}
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		s.fail(w, r, http.StatusInternalServerError, "could not read the turn's result", err)
		return
	}
	d.Running = d.Result == nil && len(d.Pending) == 0
	s.render(w, r, http.StatusOK, "turn", "Turn", d)
}

type historyData struct {
	Decided []card
	Events  []event
}

// history lists past decisions (decided confirmations, newest first) and the audit's
// decision rows.
func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rows, err := s.opt.Store.ListDecidedConfirmations(ctx, 200)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "could not read past decisions", err)
		return
	}
	evs, err := s.opt.Store.ListAudit(ctx, "")
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "could not read the audit", err)
		return
	}
	var d historyData
	now := s.opt.Now()
	turns := map[string][]store.AuditEvent{} // each turn's audit read once for the outcomes
	for _, c := range rows {
		tevs, ok := turns[c.WorkflowID]
		if !ok {
			if tevs, err = s.opt.Store.ListAudit(ctx, c.WorkflowID); err != nil {
				s.fail(w, r, http.StatusInternalServerError, "could not read the audit", err)
				return
			}
			if tevs == nil {
				tevs = []store.AuditEvent{}
			}
			turns[c.WorkflowID] = tevs
		}
		d.Decided = append(d.Decided, s.card(r, c, "", now, tevs))
	}
	for i := len(evs) - 1; i >= 0 && len(d.Events) < 200; i-- {
		e := evs[i]
		if e.Approver != "" || e.Outcome == "denied" || e.Outcome == "expired" || e.Outcome == activities.AuditConfirmationRefused || e.Outcome == activities.AuditApprovalCounted {
			d.Events = append(d.Events, s.event(e))
		}
	}
	s.render(w, r, http.StatusOK, "history", "Past decisions", d)
}

// decisionEdit is the form's value for an edit.
const decisionEdit = workflows.DecisionEdit

// maxEditLen bounds the edited arguments a form may send (what a decision may carry).
const maxEditLen = workflows.MaxEditArgumentBytes

// decide sends the signed-in approver's decision on one confirmation and remembers the turn's
// answer for the turn's page: decided, or why not (expired, decided by someone else, refused
// with a code such as stale_digest or approver_is_requester).
func (s *Server) decide(w http.ResponseWriter, r *http.Request) {
	me := current(r)
	req, row, text, err := s.decisionRequest(r)
	if err != nil {
		s.fail(w, r, http.StatusNotFound, "no such confirmation", nil)
		return
	}
	a := answer{WorkflowID: row.WorkflowID, ConfirmationID: req.ConfirmationID}
	if text != "" {
		a.Text = text
		s.answer(w, r, me, a)
		return
	}
	// A passkey decision (issue 21, item 3): the nonce /decide/challenge chose and the
	// assertion the approver's authenticator made over the MAC it returned.
	if p := r.PostForm.Get("passkey"); p != "" {
		req.Nonce, req.Passkey = r.PostForm.Get("nonce"), json.RawMessage(p)
		if !json.Valid(req.Passkey) || len(req.Passkey) > workflows.MaxPasskeyAssertionBytes || req.Nonce == "" {
			a.Text = "The passkey's answer is not one this page sends: nothing was sent."
			s.answer(w, r, me, a)
			return
		}
		// The assertion must have been made on this very page (the origin this form came
		// from), not merely on one of the passkey origins: with the default loopback relying
		// party every local port is one, and another local page could have had the approver's
		// authenticator sign a MAC obtained with a stolen session.
		if as, err := passkey.Parse(req.Passkey); err == nil && as.Origin() != requestOrigin(r) {
			s.opt.Log.Warn("web: refused a passkey assertion made on another page", "approver", me.approver, "origin", display.Visible(as.Origin()))
			a.Text = "The passkey's answer was made on another page than this one: nothing was sent."
			s.answer(w, r, me, a)
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opt.DecideTimeout)
	defer cancel()
	err = s.opt.Decide(ctx, req)
	a.OK, a.Text = verdictText(req.ConfirmationID, req, err)
	if err != nil {
		s.opt.Log.Info("web: decision not accepted", "confirmation", req.ConfirmationID, "approver", me.approver, "err", err)
	}
	s.answer(w, r, me, a)
}

// decisionRequest reads a decision form (confirmation_id, decision, reason, arguments for an
// edit, args_digest) into the signed-in approver's request; text, when set, says for the
// approver why nothing is sent. err: no such confirmation.
func (s *Server) decisionRequest(r *http.Request) (req approval.Request, row store.Confirmation, text string, err error) {
	me := current(r)
	f := r.PostForm
	id := f.Get("confirmation_id")
	row, err = s.opt.Store.GetConfirmation(r.Context(), id)
	if err != nil {
		return req, row, "", err
	}
	req = approval.Request{ConfirmationID: id, Decision: f.Get("decision"), Approver: me.approver, Reason: strings.TrimSpace(f.Get("reason"))}
	if len(req.Reason) > approval.MaxReasonBytes {
		return req, row, fmt.Sprintf("The reason is longer than %d bytes: nothing was sent.", approval.MaxReasonBytes), nil
	}
	switch req.Decision {
	case workflows.DecisionApprove:
		// A repeat grant (issue 37, item 4): "and the next N identical calls for T minutes";
		// N = 0 (the default) grants nothing, whatever T says.
		if n := strings.TrimSpace(f.Get("repeat_count")); n != "" && n != "0" {
			count, cerr := strconv.Atoi(n)
			minutes, merr := strconv.Atoi(strings.TrimSpace(f.Get("repeat_minutes")))
			if cerr != nil || merr != nil || count < 1 || count > activities.MaxRepeatCalls || minutes < 1 || minutes > activities.MaxRepeatMinutes {
				return req, row, fmt.Sprintf("A repeat grant covers 1 to %d calls for 1 to %d minutes: nothing was sent.", activities.MaxRepeatCalls, activities.MaxRepeatMinutes), nil
			}
			req.RepeatCount, req.RepeatMinutes = count, minutes
		}
	case workflows.DecisionDeny:
		if req.Reason == "" {
			return req, row, "A denial needs a reason: the model receives it.", nil
		}
	case decisionEdit:
		args := f.Get("arguments")
		if len(args) > maxEditLen || !json.Valid([]byte(args)) {
			return req, row, "The edited arguments are not valid JSON (or longer than 64 KiB): nothing was sent.", nil
		}
		if err := editRequest(&req, json.RawMessage(args)); err != nil {
			return req, row, err.Error(), nil
		}
	default:
		return req, row, "Unknown decision: nothing was sent.", nil
	}
	if err := setDigest(&req, f.Get("args_digest")); err != nil {
		return req, row, err.Error(), nil
	}
	return req, row, "", nil
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request, me signedIn, a answer) {
	if err := s.sessions.setAnswer(r.Context(), me.id, a); err != nil {
		// The decision itself went through (or was refused) already; only its note is lost.
		s.opt.Log.Error("web: record the decision's answer on the session", "err", err)
	}
	http.Redirect(w, r, turnLink(a.WorkflowID)+"#answer", http.StatusSeeOther)
}

// plainRefusal says in plain words why the turn did not accept a decision (the code follows
// in brackets, for whoever supports the approver).
func plainRefusal(code string) string {
	switch code {
	case activities.ApproverIsRequester:
		return "the person who asked for this call cannot approve it (a second person must)"
	case activities.ApproverIneligible:
		return "you are not in the approver groups that decide this call"
	case activities.ApproverAlreadyApproved:
		return "your approval already counts; another approver must approve too"
	case activities.StaleDigest:
		return "the arguments changed since this page showed them: reload and decide on what it asks now"
	case activities.TokenExpired:
		return "the call expired before your decision arrived"
	case activities.TokenRegistryChanged:
		return "the capability or its policy changed since the call was put to you: it is asked again"
	case activities.TokenReplayed, activities.NonceReplayed, activities.NonceMissing, activities.DecisionMACInvalid, activities.TokenBindingMismatch:
		return "the decision could not be verified as made on this call just now (another decision may have arrived at the same moment)"
	case activities.ApproverUnauthenticated, activities.ApproverMissing:
		return "the turn could not verify who you are"
	case activities.PasskeyRequired, activities.PasskeyUnknown, activities.PasskeyInvalid, activities.PasskeyReplayed:
		return "this call needs your registered passkey, and the passkey's answer did not verify for this decision"
	case activities.BadDecision:
		return "this decision is not possible on this call"
	}
	return "the turn refused the decision"
}

// verdictText says what became of a decision, for the approver.
func verdictText(id string, req approval.Request, err error) (bool, string) {
	var np *approval.NotPendingError
	var ref *approval.RefusedError
	var stale *approval.StaleError
	switch {
	case errors.As(err, &stale):
		return false, "Not sent: the arguments changed since this page showed them (stale page). Reload and decide on what it asks now."
	case errors.Is(err, approval.ErrPasskeyRequired):
		return false, "Not sent: this call is decided only with your passkey (reload the page and decide again; register one under Passkeys if you have none)."
	case err == nil:
		switch req.Decision {
		case workflows.DecisionApprove:
			return true, fmt.Sprintf("Approved %s as %s: the call runs once, with the arguments shown.", id, req.Approver)
		case workflows.DecisionDeny:
			return true, fmt.Sprintf("Denied %s as %s; the model receives the reason.", id, req.Approver)
		}
		return true, fmt.Sprintf("Edited %s as %s: the original is denied (edited_by_approver) and your arguments go on as a new proposal.", id, req.Approver)
	case errors.As(err, &np) && np.Decision == store.DecisionExpired:
		return false, fmt.Sprintf("Not sent: %s expired before your decision; the call never runs.", id)
	case errors.As(err, &np):
		return false, "Not decided: " + np.Error()
	case errors.As(err, &ref) && ref.Code == activities.QuorumPending:
		// Counted towards the capability's quorum (issue 21): the call waits for others.
		return true, fmt.Sprintf("Your approval of %s counted; the call waits for more approvals (the card shows who approved so far).", id)
	case errors.As(err, &ref):
		msg := "Not accepted: " + plainRefusal(ref.Code)
		if ref.Detail != "" {
			msg += " (" + ref.Detail + ")"
		}
		if ref.Reissued {
			msg += ". The call still waits: decide again"
		}
		return false, msg + ". [" + ref.Code + "]"
	case errors.Is(err, context.DeadlineExceeded):
		return false, "No answer from the turn in time (is a worker running?); the decision was not accepted."
	}
	return false, "The decision could not be delivered: " + err.Error()
}
