package identity

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ConfigFromEnv: unset issuer is no provider; the secret from a mounted file; the group map
// parsed, a malformed entry or an approver group off the name pattern refused.
func TestConfigFromEnv(t *testing.T) {
	for _, k := range []string{EnvIssuer, EnvClientID, EnvClientSecret, EnvClientSecretFile, EnvRedirectURL, EnvScopes, EnvSubjectClaim, EnvNameClaim, EnvGroupsClaim, EnvGroupMap, EnvLabel, EnvRecheck} {
		t.Setenv(k, "")
	}
	if _, _, ok, err := ConfigFromEnv(); ok || err != nil {
		t.Fatalf("no issuer: %v %v", ok, err)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("s3cret\n"), 0o600)
	t.Setenv(EnvIssuer, "https://login.microsoftonline.com/tenant/v2.0")
	t.Setenv(EnvClientID, "app")
	t.Setenv(EnvRedirectURL, "https://approve.example.com/oidc/callback")
	t.Setenv(EnvClientSecretFile, secret)
	t.Setenv(EnvSubjectClaim, "oid")
	t.Setenv(EnvGroupMap, "0b1c-guid=payments, Airlock Ops=ops")
	t.Setenv(EnvRecheck, "2m")
	c, s, ok, err := ConfigFromEnv()
	if err != nil || !ok || c.ClientSecret != "s3cret" || c.SubjectClaim != "oid" || c.GroupMap["0b1c-guid"] != "payments" || c.GroupMap["Airlock Ops"] != "ops" || s.Recheck != 2*time.Minute {
		t.Fatalf("%+v %+v %v %v", c, s, ok, err)
	}
	for _, bad := range []string{"payments", "x=", "x=pay ments"} {
		t.Setenv(EnvGroupMap, bad)
		if _, _, _, err := ConfigFromEnv(); err == nil {
			t.Errorf("group map %q accepted", bad)
		}
	}
}
