package web

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/token"
)

// SurfaceName is the approver page's surface name in the approvers file; its decisions are
// attested "surface:web".
const SurfaceName = "web"

// EnsureSurface loads the page's surface credential from credPath, or creates it (owner-only)
// and registers its public key as surface "web" in the approvers file at approversPath.
// created reports that a new credential was made (the caller says so). A credential whose key
// the approvers file does not list (the file was replaced) is registered again.
func EnsureSurface(credPath, approversPath string) (cred approvers.Credential, created bool, err error) {
	cred, err = approvers.LoadCredential(credPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if cred, err = approvers.NewCredential("surface:" + SurfaceName); err != nil {
			return cred, false, err
		}
		if err = approvers.SaveCredential(credPath, cred); err != nil {
			return cred, false, fmt.Errorf("web: save the surface credential: %w", err)
		}
		created = true
	case err != nil:
		return cred, false, fmt.Errorf("web: load the surface credential: %w", err)
	}
	f, err := approvers.ReadFile(approversPath)
	if err != nil {
		return cred, created, fmt.Errorf("web: read the approvers file: %w", err)
	}
	for _, s := range f.Surfaces {
		if s.Name == SurfaceName && s.PublicKey == cred.Public() {
			return cred, created, nil
		}
	}
	if err := approvers.AddSurface(approversPath, approvers.Surface{Name: SurfaceName, PublicKey: cred.Public()}); err != nil {
		return cred, created, fmt.Errorf("web: register the surface key in %s: %w", approversPath, err)
	}
	return cred, true, nil
}

// Decider is the DecideFunc that signs with the approver key, attests with the surface
// credential and sends the decide update (approval.Decide).
func Decider(c client.Client, st *store.Store, key token.Key, surface approvers.Credential) DecideFunc {
	return func(ctx context.Context, r approval.Request) error {
		r.Signer = surface
		return approval.Decide(ctx, c, st, key, r)
	}
}

// FileApprovers adapts an approvers.Source to Options.Approvers.
func FileApprovers(src *approvers.Source) func() (Authenticator, error) {
	return func() (Authenticator, error) {
		set, err := src.Current()
		if err != nil {
			return nil, err
		}
		return set, nil
	}
}
