package web

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/identity"
)

// Sign-in through the company's identity provider (issue 33, item 1). GET /oidc/login starts
// the provider's authorization code flow (identity.RP: PKCE, state bound to this browser,
// nonce); GET /oidc/callback finishes it, resolves the verified identity to an approver
// (identity.Resolve: a file approver bound to the person by oidc_subject, else the name claim,
// refused when the approvers file gives that name to another person), records the account in
// the approvers file with its mapped groups and a validity (approvers.UpsertProvider), so the
// workers authenticate and judge its decisions like any approver's, and starts a session.
//
// The page checks each signed-in person with the provider again every Recheck (on their
// requests and in the background, RecheckIdentities): the groups the provider lists now replace
// the recorded ones, so a person removed from a group loses it at the next check, and the
// approvals they gave stop counting where they no longer qualify (the workers judge quorums at
// execution against the file). A person the provider no longer vouches for (removed, disabled,
// grant revoked) is removed from the file, their passkeys with it, and signed out.

// OIDCOptions turn on provider sign-in.
type OIDCOptions struct {
	// RP is the relying party at the provider (identity.New).
	RP *identity.RP
	// ApproversPath is the approvers file provider accounts are recorded in (the one the
	// workers read).
	ApproversPath string
	// Recheck is how often a signed-in person is checked with the provider again (default
	// DefaultOIDCRecheck). A recorded account stays valid for twice as long without a check.
	Recheck time.Duration
	// Label names the provider on the sign-in page ("Okta", "Entra ID").
	Label string
}

// DefaultOIDCRecheck is how often the page asks the provider again about a signed-in person.
const DefaultOIDCRecheck = 5 * time.Minute

// oidcPeople are the provider identities the page holds (with their refresh tokens, which
// never leave this process), by approver name.
type oidcPeople struct {
	mu sync.Mutex
	m  map[string]*oidcPerson
}

type oidcPerson struct {
	id       identity.Identity
	checked  time.Time
	signed   time.Time // sign-in: the identity is dropped SessionMax after it
	checking bool      // a check is running: one at a time (a rotated refresh token is single-use)
}

func (o *OIDCOptions) recheck() time.Duration {
	if o.Recheck <= 0 {
		return DefaultOIDCRecheck
	}
	return o.Recheck
}

// oidcLogin starts a provider sign-in.
func (s *Server) oidcLogin(w http.ResponseWriter, r *http.Request) {
	s.opt.OIDC.RP.Begin(w, r, "/")
}

// oidcCallback finishes a provider sign-in and starts the approver's session.
func (s *Server) oidcCallback(w http.ResponseWriter, r *http.Request) {
	id, _, err := s.opt.OIDC.RP.Finish(r)
	if err != nil {
		s.opt.Log.Warn("web: provider sign-in refused", "err", err)
		s.render(w, r, http.StatusForbidden, "login", "Sign in", "Sign-in through the identity provider was refused: "+refusalText(err))
		return
	}
	name, err := s.recordIdentity(r.Context(), id)
	if err != nil {
		s.opt.Log.Warn("web: provider sign-in refused", "subject", id.Person(), "err", err)
		s.render(w, r, http.StatusForbidden, "login", "Sign in", "Sign-in through the identity provider was refused: "+refusalText(err))
		return
	}
	now := s.opt.Now()
	s.oidc.mu.Lock()
	s.oidc.m[name] = &oidcPerson{id: id, checked: now, signed: now}
	s.oidc.mu.Unlock()
	if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" {
		if err := s.sessions.remove(r.Context(), c.Value); err != nil {
			s.fail(w, r, http.StatusInternalServerError, "could not end the previous session (the store did not answer); try again", err)
			return
		}
	}
	sid, err := s.sessions.create(r.Context(), name, "")
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "could not start a session", err)
		return
	}
	http.SetCookie(w, sessionCookie(sid, int(SessionMax/time.Second)))
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// refusalText is what the sign-in page says about a refused provider sign-in (no token, no
// claim value: those go to the log).
func refusalText(err error) string {
	switch {
	case errors.Is(err, identity.ErrState):
		return "the sign-in expired, was used already or was started in another browser; start again."
	case errors.Is(err, identity.ErrTwoPeople), errors.Is(err, approvers.ErrNotProvider):
		return "your name belongs to another approver in the approvers file; an administrator binds it to your account (oidc_subject)."
	case errors.Is(err, identity.ErrName):
		return "your account's name is not a usable approver name."
	default:
		return "the provider's answer did not verify."
	}
}

// recordIdentity resolves id to an approver and records it in the approvers file with its
// groups and a fresh validity; it returns the approver name.
func (s *Server) recordIdentity(_ context.Context, id identity.Identity) (string, error) {
	auth, err := s.opt.Approvers()
	if err != nil {
		return "", err
	}
	set, _ := auth.(*approvers.Set)
	name, groups, err := identity.Resolve(set, id)
	if err != nil {
		return "", err
	}
	until := s.opt.Now().Add(2 * s.opt.OIDC.recheck()).UTC()
	if err := approvers.UpsertProvider(s.opt.OIDC.ApproversPath, approvers.Approver{Name: name, Subject: id.Person(), Groups: groups, ValidUntil: &until}); err != nil {
		return "", err
	}
	return name, nil
}

// checkIdentity checks approver with the provider again when their last check is older than
// Recheck (nothing to do for an approver who did not sign in through the provider). It reports
// false when the provider no longer vouches for them: their entry and passkeys are removed.
func (s *Server) checkIdentity(ctx context.Context, approver string, force bool) bool {
	now := s.opt.Now()
	s.oidc.mu.Lock()
	p, ok := s.oidc.m[approver]
	if !ok || p.checking || (!force && now.Sub(p.checked) < s.opt.OIDC.recheck()) {
		// Not a provider account, checked recently, or being checked by another request (its
		// account stays valid in the file until that check ends).
		s.oidc.mu.Unlock()
		return true
	}
	p.checking = true
	cur := p.id
	s.oidc.mu.Unlock()
	defer func() {
		s.oidc.mu.Lock()
		p.checking = false
		s.oidc.mu.Unlock()
	}()
	if now.Sub(p.signed) >= SessionMax {
		s.forgetIdentity(ctx, approver, cur, "the sign-in is older than the longest session")
		return false
	}
	id, err := s.opt.OIDC.RP.Recheck(ctx, cur)
	if err == nil {
		var name string
		if name, err = s.recordIdentity(ctx, id); err == nil && name != approver {
			err = errors.New("the person now resolves to another approver name")
		}
	}
	if err != nil {
		s.forgetIdentity(ctx, approver, cur, err.Error())
		return false
	}
	s.oidc.mu.Lock()
	p.id, p.checked = id, now
	s.oidc.mu.Unlock()
	return true
}

// forgetIdentity removes a person the provider no longer vouches for: their entry in the
// approvers file (so workers stop counting their approvals), their passkeys and sessions.
func (s *Server) forgetIdentity(ctx context.Context, approver string, id identity.Identity, why string) {
	s.opt.Log.Warn("web: the identity provider no longer vouches for a signed-in approver; removed", "approver", approver, "why", why)
	s.oidc.mu.Lock()
	delete(s.oidc.m, approver)
	s.oidc.mu.Unlock()
	if _, err := approvers.RemoveProvider(s.opt.OIDC.ApproversPath, approver, id.Person()); err != nil {
		s.opt.Log.Error("web: remove a provider account from the approvers file", "approver", approver, "err", err)
	}
	if pks, err := s.opt.Store.ListPasskeys(ctx, approver); err == nil {
		for _, pk := range pks {
			_ = s.opt.Store.RemovePasskey(ctx, approver, pk.CredentialID, s.opt.Now())
		}
	}
	s.endSessions(ctx, approver)
}

// RecheckIdentities checks every provider-signed-in person whose last check is older than
// Recheck (airlock web calls it every Recheck, so an idle approver's group change or removal
// is seen too). force checks them all now.
func (s *Server) RecheckIdentities(ctx context.Context, force bool) {
	if s.opt.OIDC == nil {
		return
	}
	s.oidc.mu.Lock()
	names := make([]string, 0, len(s.oidc.m))
	for n := range s.oidc.m {
		names = append(names, n)
	}
	s.oidc.mu.Unlock()
	for _, n := range names {
		s.checkIdentity(ctx, n, force)
	}
}
