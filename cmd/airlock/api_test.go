package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/internal/appapi"
)

// Tokens below the strength floor are refused at start (issue 32): an API key given in the
// clear in the keys file, and the stream endpoint's token.
func TestWeakTokensRefusedAtStart(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "api-keys.json")
	if err := os.WriteFile(keys, []byte(`{"callers":[{"name":"app","principal":"alice","key":"x"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AIRLOCK_API_KEYS", keys)
	if err := runAPIServe(context.Background(), io.Discard, "127.0.0.1:0", nil); !errors.Is(err, appapi.ErrWeakKey) {
		t.Fatalf("api serve with a 1-character key: %v", err)
	}
	for _, tok := range []string{"x", "0123456789abcdef", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"} {
		t.Setenv("AIRLOCK_STREAM_TOKEN", tok)
		if _, err := streamToken(""); !errors.Is(err, appapi.ErrWeakKey) {
			t.Errorf("stream token %q: %v", tok, err)
		}
	}
	good, _, _ := appapi.NewKey()
	t.Setenv("AIRLOCK_STREAM_TOKEN", good)
	if _, err := streamToken(""); err != nil {
		t.Errorf("a minted key as stream token: %v", err)
	}
}
