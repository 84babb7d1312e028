package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

func mustKey(t *testing.T, id string) Key {
	t.Helper()
	k, err := NewKey(id)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func plainPayload(t *testing.T, v any) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Encrypted payloads carry the key id and no plaintext, decode back to the original, and keep
// decoding after a rotation (old key kept in the ring) while new payloads use the new key.
func TestRoundTripAndRotation(t *testing.T) {
	k1, k2 := mustKey(t, "k1"), mustKey(t, "k2")
	c1, _ := New([]Key{k1})
	in := plainPayload(t, map[string]string{"message": "transfer 100 to the attacker"})
	enc, err := c1.Encode([]*commonpb.Payload{in})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(enc[0].Data, []byte("attacker")) || string(enc[0].Metadata[MetadataKeyID]) != "k1" ||
		string(enc[0].Metadata["encoding"]) != Encoding {
		t.Fatalf("encoded payload = %v", enc[0])
	}
	rotated, _ := New([]Key{k2, k1}) // k2 now encrypts; k1 still decrypts
	dec, err := rotated.Decode(enc)
	if err != nil || !bytes.Equal(dec[0].Data, in.Data) || string(dec[0].Metadata["encoding"]) != "json/plain" {
		t.Fatalf("decode after rotation: %v %v", dec, err)
	}
	enc2, _ := rotated.Encode([]*commonpb.Payload{in})
	if string(enc2[0].Metadata[MetadataKeyID]) != "k2" {
		t.Fatalf("new payloads use %q, want k2", enc2[0].Metadata[MetadataKeyID])
	}
	if _, err := c1.Decode(enc2); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("a ring without k2 decoding a k2 payload: %v, want ErrUnknownKey", err)
	}
	// Payloads from before encryption pass through.
	if dec, err := rotated.Decode([]*commonpb.Payload{in}); err != nil || dec[0] != in {
		t.Fatalf("plain payload: %v %v", dec, err)
	}
}

// A tampered ciphertext, or a key id swapped in the metadata, does not decrypt.
func TestTamperingIsDetected(t *testing.T) {
	k1, k2 := mustKey(t, "k1"), mustKey(t, "k2")
	c, _ := New([]Key{k1, k2})
	enc, _ := c.Encode([]*commonpb.Payload{plainPayload(t, "hello")})
	flipped := &commonpb.Payload{Metadata: enc[0].Metadata, Data: append([]byte(nil), enc[0].Data...)}
	flipped.Data[len(flipped.Data)-1] ^= 1
	if _, err := c.Decode([]*commonpb.Payload{flipped}); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("tampered: %v", err)
	}
	swapped := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte(Encoding), MetadataKeyID: []byte("k2")}, Data: enc[0].Data}
	if _, err := c.Decode([]*commonpb.Payload{swapped}); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("key id swapped: %v", err)
	}
}

// A malformed key ring is refused, and the error never quotes key material.
func TestKeyRingErrorsHideKeys(t *testing.T) {
	secret := strings.Repeat("ab", 31) // 62 hex characters: one byte short
	_, err := ParseKeyRing([]byte("# ring\nk1 " + secret + "\n"))
	if !errors.Is(err, ErrKeyRing) || strings.Contains(err.Error(), secret) {
		t.Fatalf("err = %v", err)
	}
	if _, err := ParseKeyRing([]byte("\n# nothing\n")); !errors.Is(err, ErrKeyRing) {
		t.Fatalf("empty ring: %v", err)
	}
	k := mustKey(t, "a")
	keys, err := ParseKeyRing([]byte(k.Line() + "\n" + mustKey(t, "b").Line() + "\n"))
	if err != nil || len(keys) != 2 || keys[0] != k {
		t.Fatalf("ring = %v %v", keys, err)
	}
	if _, err := New([]Key{k, k}); !errors.Is(err, ErrKeyRing) {
		t.Fatalf("duplicate id: %v", err)
	}
}

// The codec server decodes for a caller with the token, refuses one without (401) and browsers
// from other origins (403), and answers the UI origin's preflight with CORS headers.
func TestCodecServer(t *testing.T) {
	c, _ := New([]Key{mustKey(t, "k1")})
	const token = "0123456789abcdef-token"
	const ui = "http://127.0.0.1:18080"
	srv := httptest.NewServer(Handler(c, token, []string{ui}))
	defer srv.Close()
	enc, _ := c.Encode([]*commonpb.Payload{plainPayload(t, "secret user message")})
	body, _ := json.Marshal(map[string]any{"payloads": []map[string]any{{"metadata": map[string][]byte{
		"encoding": enc[0].Metadata["encoding"], MetadataKeyID: enc[0].Metadata[MetadataKeyID]}, "data": enc[0].Data}}})
	post := func(auth, origin string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/decode", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp, b.String()
	}
	if resp, _ := post("", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d", resp.StatusCode)
	}
	if resp, _ := post("Bearer wrong-token-wrong-token", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", resp.StatusCode)
	}
	if resp, _ := post("Bearer "+token, "http://evil.example"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign origin: %d", resp.StatusCode)
	}
	resp, out := post("Bearer "+token, ui)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != ui {
		t.Fatalf("decode: %d %v %s", resp.StatusCode, resp.Header, out)
	}
	var got struct {
		Payloads []struct {
			Data []byte `json:"data"`
		} `json:"payloads"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Payloads) != 1 || !strings.Contains(string(got.Payloads[0].Data), "secret user message") {
		t.Fatalf("decoded = %s (%v)", out, err)
	}
	req, _ := http.NewRequest(http.MethodOptions, srv.URL+"/decode", nil)
	req.Header.Set("Origin", ui)
	req.Header.Set("Access-Control-Request-Method", "POST")
	pre, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	pre.Body.Close()
	if pre.StatusCode != http.StatusNoContent || !strings.Contains(pre.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Fatalf("preflight: %d %v", pre.StatusCode, pre.Header)
	}
}

// A browser signs in with the token on /login and gets a cookie (not the token) that
// authorizes codec requests; a wrong token gets no cookie.
func TestCodecServerBrowserSignIn(t *testing.T) {
	c, _ := New([]Key{mustKey(t, "k1")})
	const token = "0123456789abcdef-token"
	srv := httptest.NewServer(Handler(c, token, nil))
	defer srv.Close()
	resp, err := http.PostForm(srv.URL+"/login", map[string][]string{"token": {"wrong"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Fatalf("wrong token: %d %v", resp.StatusCode, resp.Cookies())
	}
	resp, err = http.PostForm(srv.URL+"/login", map[string][]string{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cks := resp.Cookies()
	if len(cks) != 1 || cks[0].Name != CookieName || strings.Contains(cks[0].Value, token) || !cks[0].HttpOnly || cks[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie = %+v", cks)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/decode", strings.NewReader(`{"payloads":[]}`))
	req.AddCookie(cks[0])
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusOK {
		t.Fatalf("decode with the cookie: %d", r2.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodPost, srv.URL+"/decode", strings.NewReader(`{"payloads":[]}`))
	req.AddCookie(&http.Cookie{Name: CookieName, Value: "forged"})
	r3, _ := http.DefaultClient.Do(req)
	r3.Body.Close()
	if r3.StatusCode != http.StatusUnauthorized {
		t.Fatalf("forged cookie: %d", r3.StatusCode)
	}
}

// The codec server's browser sessions expire after SessionMax, and a client address that
// failed LoginFailures sign-ins or bearer tokens within LoginWindow waits (429) until the
// window slides, even with the right token (issue 21, item 4).
func TestCodecServerSessionsExpireAndSignInsAreLimited(t *testing.T) {
	c, _ := New([]Key{mustKey(t, "k1")})
	const token = "0123456789abcdef-token"
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	srv := httptest.NewServer(handlerAt(c, token, nil, clock))
	defer srv.Close()
	post := func(path string, form url.Values, header http.Header) *http.Response {
		var body io.Reader = strings.NewReader(`{"payloads":[]}`)
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, body)
		for k, v := range header {
			req.Header[k] = v
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := post("/login", url.Values{"token": {token}}, nil)
	cks := resp.Cookies()
	if len(cks) != 1 || cks[0].MaxAge != int(SessionMax.Seconds()) {
		t.Fatalf("cookie = %+v", cks)
	}
	withCookie := http.Header{"Cookie": {cks[0].Name + "=" + cks[0].Value}}
	if r := post("/decode", nil, withCookie); r.StatusCode != http.StatusOK {
		t.Fatalf("fresh session: %d", r.StatusCode)
	}
	advance(SessionMax)
	if r := post("/decode", nil, withCookie); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("expired session: %d", r.StatusCode)
	}
	// A cookie whose expiry was moved without the token does not verify.
	_, mac, _ := strings.Cut(cks[0].Value, ".")
	moved := http.Header{"Cookie": {CookieName + "=" + fmt.Sprint(now.Add(time.Hour).Unix()) + "." + mac}}
	if r := post("/decode", nil, moved); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("moved expiry: %d", r.StatusCode)
	}
	for i := 0; i < LoginFailures; i++ {
		h := http.Header{"Authorization": {"Bearer wrong"}}
		if i%2 == 0 {
			if r := post("/login", url.Values{"token": {"wrong"}}, nil); r.StatusCode != http.StatusUnauthorized {
				t.Fatalf("failure %d: %d", i, r.StatusCode)
			}
			continue
		}
		if r := post("/decode", nil, h); r.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i, r.StatusCode)
		}
	}
	if r := post("/decode", nil, http.Header{"Authorization": {"Bearer " + token}}); r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("right token after %d failures: %d, want 429", LoginFailures, r.StatusCode)
	}
	advance(LoginWindow)
	if r := post("/decode", nil, http.Header{"Authorization": {"Bearer " + token}}); r.StatusCode != http.StatusOK {
		t.Fatalf("after the window: %d", r.StatusCode)
	}
}
