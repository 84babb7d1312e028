package catalog

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// Caller is who a catalog read is for, as the host established it (the turn's principal and
// capability scope), never as the model's arguments claim.
type Caller struct {
	Principal string
	Scope     []string
}

// scopeMaterial is the caller's identity as cursors bind it: principal and sorted scope.
func (c Caller) scopeMaterial() string {
	s := slices.Clone(c.Scope)
	slices.Sort(s)
	return c.Principal + "\x00" + strings.Join(s, "\x00")
}

// scopeTag is a short, non-reversible tag of the caller's scope carried in the cursor, so a
// foreign cursor can be told from a tampered one.
func (c Caller) scopeTag() string {
	s := sha256.Sum256([]byte("scope\x00" + c.scopeMaterial()))
	return hex.EncodeToString(s[:8])
}

// cursorPayload is what a cursor carries (base64url JSON), authenticated by the HMAC beside it
// over the payload and the caller's full scope.
type cursorPayload struct {
	V      int    `json:"v"`
	Pos    string `json:"p"` // the last "id@version" returned; the next page starts after it
	Rev    string `json:"r"` // the caller's visible revision the page was cut from
	Exp    int64  `json:"e"` // expiry, Unix seconds
	Filter string `json:"f"`
	Limit  int    `json:"l"`
	Scope  string `json:"s"`
}

// Cursor refusal kinds (the detail of a stale_cursor refusal; the code is always the same).
const (
	CursorMalformed = "malformed"
	CursorForeign   = "foreign"
	CursorExpired   = "expired"
	CursorMismatch  = "mismatch" // another filter or limit than the one it was issued for
	CursorStale     = "stale"    // the caller's visible revision changed since
)

// DeriveCursorKey derives the cursor HMAC key from a worker secret shared by every worker
// (the approver key), under its own label: the secret itself never MACs a cursor.
func DeriveCursorKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("airlock capability-catalog cursor key v1"))
	return m.Sum(nil)
}

func cursorMAC(key []byte, caller Caller, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("capability-catalog-cursor.v1\x00"))
	m.Write([]byte(caller.scopeMaterial()))
	m.Write([]byte{0})
	m.Write(payload)
	return m.Sum(nil)
}

// issueCursor mints the cursor of the page after pos.
func issueCursor(key []byte, caller Caller, filter string, limit int, rev, pos string, exp time.Time) string {
	p, _ := json.Marshal(cursorPayload{V: 1, Pos: pos, Rev: rev, Exp: exp.Unix(), Filter: filter, Limit: limit, Scope: caller.scopeTag()})
	enc := base64.RawURLEncoding
	return enc.EncodeToString(p) + "." + enc.EncodeToString(cursorMAC(key, caller, p))
}

// openCursor verifies a cursor for caller, filter, limit and the current visible revision at
// now and returns the position it continues from, or the kind of stale cursor it is.
func openCursor(key []byte, caller Caller, filter string, limit int, rev, cursor string, now time.Time) (pos, kind string) {
	enc := base64.RawURLEncoding
	body, sig, ok := strings.Cut(cursor, ".")
	if !ok {
		return "", CursorMalformed
	}
	p, err1 := enc.DecodeString(body)
	mac, err2 := enc.DecodeString(sig)
	if err1 != nil || err2 != nil {
		return "", CursorMalformed
	}
	var cp cursorPayload
	if json.Unmarshal(p, &cp) != nil || cp.V != 1 {
		return "", CursorMalformed
	}
	if !hmac.Equal(mac, cursorMAC(key, caller, p)) {
		if cp.Scope != caller.scopeTag() {
			return "", CursorForeign
		}
		return "", CursorMalformed
	}
	switch {
	case !now.Before(time.Unix(cp.Exp, 0)):
		return "", CursorExpired
	case cp.Filter != filter || cp.Limit != limit:
		return "", CursorMismatch
	case cp.Rev != rev:
		return "", CursorStale
	}
	return cp.Pos, ""
}
