package identity

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/internal/approvers"
)

// Settings read by ConfigFromEnv (docs/security.md, "One person: identity provider sign-in").
const (
	EnvIssuer           = "AIRLOCK_OIDC_ISSUER"
	EnvClientID         = "AIRLOCK_OIDC_CLIENT_ID"
	EnvClientSecret     = "AIRLOCK_OIDC_CLIENT_SECRET"
	EnvClientSecretFile = "AIRLOCK_OIDC_CLIENT_SECRET_FILE"
	EnvRedirectURL      = "AIRLOCK_OIDC_REDIRECT_URL"
	EnvScopes           = "AIRLOCK_OIDC_SCOPES"
	EnvSubjectClaim     = "AIRLOCK_OIDC_SUBJECT_CLAIM"
	EnvNameClaim        = "AIRLOCK_OIDC_NAME_CLAIM"
	EnvGroupsClaim      = "AIRLOCK_OIDC_GROUPS_CLAIM"
	EnvGroupMap         = "AIRLOCK_OIDC_GROUP_MAP"
	EnvLabel            = "AIRLOCK_OIDC_LABEL"
	EnvRecheck          = "AIRLOCK_OIDC_RECHECK"
)

// EnvSettings are the page's provider settings besides Config.
type EnvSettings struct {
	// Label names the provider on the sign-in page.
	Label string
	// Recheck is how often a signed-in person is checked again (0: the page's default).
	Recheck time.Duration
}

// ConfigFromEnv reads the approver page's provider from the environment: ok is false when
// AIRLOCK_OIDC_ISSUER is unset (no provider sign-in). The client secret comes from
// AIRLOCK_OIDC_CLIENT_SECRET_FILE (a file an operator mounts from a secret store) or
// AIRLOCK_OIDC_CLIENT_SECRET. AIRLOCK_OIDC_GROUP_MAP is a comma list of
// "<provider group>=<approver group>" (the provider group as the groups claim lists it: a
// name, or Entra ID's object id); each approver group matches approvers.NamePattern. Errors: a
// missing client id or redirect URL, an unreadable secret file, a malformed map or duration.
func ConfigFromEnv() (Config, EnvSettings, bool, error) {
	iss := strings.TrimSpace(os.Getenv(EnvIssuer))
	if iss == "" {
		return Config{}, EnvSettings{}, false, nil
	}
	c := Config{Issuer: iss, ClientID: os.Getenv(EnvClientID), ClientSecret: os.Getenv(EnvClientSecret), RedirectURL: os.Getenv(EnvRedirectURL),
		SubjectClaim: os.Getenv(EnvSubjectClaim), NameClaim: os.Getenv(EnvNameClaim), GroupsClaim: os.Getenv(EnvGroupsClaim), GroupMap: map[string]string{}}
	if f := os.Getenv(EnvClientSecretFile); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return Config{}, EnvSettings{}, false, fmt.Errorf("identity: %s: %w", EnvClientSecretFile, err)
		}
		c.ClientSecret = strings.TrimSpace(string(b))
	}
	if c.ClientID == "" || c.RedirectURL == "" {
		return Config{}, EnvSettings{}, false, errors.New("identity: " + EnvIssuer + " needs " + EnvClientID + " and " + EnvRedirectURL)
	}
	if s := os.Getenv(EnvScopes); s != "" {
		c.Scopes = []string{}
		for _, f := range strings.Split(s, ",") {
			if f = strings.TrimSpace(f); f != "" {
				c.Scopes = append(c.Scopes, f)
			}
		}
	}
	for _, pair := range strings.Split(os.Getenv(EnvGroupMap), ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		from, to, ok := strings.Cut(pair, "=")
		from, to = strings.TrimSpace(from), strings.TrimSpace(to)
		if !ok || from == "" || !approvers.NamePattern.MatchString(to) {
			return Config{}, EnvSettings{}, false, fmt.Errorf("identity: %s entry %q is not \"<provider group>=<approver group>\" (approver group: %s)", EnvGroupMap, pair, approvers.NamePattern)
		}
		c.GroupMap[from] = to
	}
	set := EnvSettings{Label: os.Getenv(EnvLabel)}
	if d := os.Getenv(EnvRecheck); d != "" {
		v, err := time.ParseDuration(d)
		if err != nil || v < 10*time.Second {
			return Config{}, EnvSettings{}, false, fmt.Errorf("identity: %s=%q is not a duration of 10s or more", EnvRecheck, d)
		}
		set.Recheck = v
	}
	return c, set, true, nil
}
