package passkey

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"

	"github.com/airlock-dev/airlock/internal/passkey/passkeytest"
)

// FuzzParseVerify: whatever bytes arrive as a decision's assertion (it travels in a signal
// anyone who may signal the turn can send), Parse and Verify return a verdict and never panic,
// and only the one genuine assertion verifies. Seeds: a genuine assertion, its members cut,
// emptied and retyped, and authenticator data with every flag and extension bit set.
func FuzzParseVerify(f *testing.F) {
	a, err := passkeytest.New()
	if err != nil {
		f.Fatal(err)
	}
	cfg := Config{RPID: "localhost"}
	ch := make([]byte, 32)
	good, err := a.Assert(passkeytest.Assertion{Origin: "http://localhost:8780", RPID: "localhost", Challenge: ch, Flags: flagsUPUV, Counter: 3})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	var m map[string]any
	_ = json.Unmarshal(good, &m)
	resp := m["response"].(map[string]any)
	for _, mut := range []func(map[string]any, map[string]any){
		func(m, r map[string]any) { delete(r, "authenticatorData") },
		func(m, r map[string]any) { r["authenticatorData"] = "" },
		func(m, r map[string]any) {
			r["authenticatorData"] = base64.RawURLEncoding.EncodeToString(make([]byte, 37))
		},
		func(m, r map[string]any) {
			// AT and ED flags with no data behind them.
			ad := make([]byte, 37)
			ad[32] = 0xff
			r["authenticatorData"] = base64.RawURLEncoding.EncodeToString(ad)
		},
		func(m, r map[string]any) {
			ad := make([]byte, 40)
			ad[32] = 0x85                                 // UP, UV, ED
			ad = append(ad, 0xbf, 0xff, 0x9f, 0x9f, 0x9f) // indefinite CBOR nesting
			r["authenticatorData"] = base64.RawURLEncoding.EncodeToString(ad)
		},
		func(m, r map[string]any) {
			r["clientDataJSON"] = base64.RawURLEncoding.EncodeToString([]byte(`{"type":1}`))
		},
		func(m, r map[string]any) { r["clientDataJSON"] = "!!" },
		func(m, r map[string]any) { r["signature"] = "" },
		func(m, r map[string]any) { r["userHandle"] = base64.RawURLEncoding.EncodeToString(make([]byte, 2048)) },
		func(m, r map[string]any) { m["rawId"] = "" },
		func(m, r map[string]any) { m["type"] = "password" },
		func(m, r map[string]any) { m["response"] = nil },
	} {
		mm := map[string]any{}
		for k, v := range m {
			mm[k] = v
		}
		rr := map[string]any{}
		for k, v := range resp {
			rr[k] = v
		}
		mm["response"] = rr
		mut(mm, rr)
		b, _ := json.Marshal(mm)
		f.Add(b)
	}
	f.Add([]byte(`null`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"id":{}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		as, err := Parse(raw)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse error %v does not wrap ErrMalformed", err)
			}
			return
		}
		v, err := Verify(cfg, as, Credential{PublicKey: a.PublicKey(), SignCount: 2}, ch)
		if err == nil && (string(raw) != string(good) || v.SignCount != 3) {
			// Only the genuine assertion (or one that differs in what the signature does not
			// cover: JSON spelling, id, user handle) verifies, and then with its counter.
			if v.SignCount != 3 {
				t.Fatalf("a mutated assertion verified with counter %d", v.SignCount)
			}
		}
	})
}
