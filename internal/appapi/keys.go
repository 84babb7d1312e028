package appapi

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/clients"
)

// Caller is one authenticated caller of the API: a requester (Principal set: it starts turns
// for that principal and reads only that principal's turns), an approver (Approver set: it
// sees and decides the confirmations its approver groups may decide), or both.
type Caller struct {
	// Name identifies the caller (API keys file "name"); idempotency keys are per caller.
	Name string `json:"name"`
	// Principal is whom the turns this caller starts act for ("" = not a requester).
	Principal string `json:"principal,omitempty"`
	// Approver is the approver (in the approvers file) this caller decides as ("" = not an
	// approver).
	Approver string `json:"approver,omitempty"`
	// Key is the API key itself (checked against the strength floor at load), or empty when
	// KeySHA256 is given.
	Key string `json:"key,omitempty"`
	// KeySHA256 is the hex SHA-256 of a key minted by NewKey (always MinKeyBits strong).
	KeySHA256 string `json:"key_sha256,omitempty"`
}

// Keys is the set of API callers, indexed by the SHA-256 of their keys.
type Keys struct {
	byHash map[[32]byte]Caller
}

// MinKeyBits is the strength floor of an API key: a key given in the clear must carry at
// least this many bits by the estimate of keyBits (its length times the log2 of the
// alphabet its characters come from), else the keys file is refused at start.
const MinKeyBits = 128

// ErrWeakKey: an API key below MinKeyBits (or the stream token's floor). Wrapped with the
// caller's name, never the key.
var ErrWeakKey = errors.New("appapi: API key below the strength floor")

// ErrKeysFile: the API keys file is missing, malformed or inconsistent.
var ErrKeysFile = errors.New("appapi: API keys file")

var callerName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// keyBits estimates the entropy of key: its length times log2 of the smallest of the
// alphabets hex (16), base64url (64) or printable ASCII (95) that holds every character, and
// 0 for a key with fewer than 8 distinct characters (a repeated pattern).
func keyBits(key string) float64 {
	distinct := map[rune]bool{}
	alpha := 16.0
	for _, r := range key {
		distinct[r] = true
		switch {
		case strings.ContainsRune("0123456789abcdefABCDEF", r):
		case r < 128 && (r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'):
			alpha = math.Max(alpha, 64)
		case r > 32 && r < 127:
			alpha = 95
		default:
			return 0 // whitespace, control or non-ASCII: not a key this API issues
		}
	}
	if len(distinct) < 8 {
		return 0
	}
	return float64(len(key)) * math.Log2(alpha)
}

// CheckStrength returns ErrWeakKey (naming what, never the key) when key is below MinKeyBits.
func CheckStrength(what, key string) error {
	if b := keyBits(key); b < MinKeyBits {
		return fmt.Errorf("%w: %s carries about %.0f bits, at least %d are needed (mint one with `airlock api key`, or openssl rand -hex 32)", ErrWeakKey, what, b, MinKeyBits)
	}
	return nil
}

// NewKey mints an API key of 256 random bits ("alk_" and 64 hex digits) and returns it with
// its hex SHA-256 (what the keys file stores).
func NewKey() (key, sum string, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("appapi: mint an API key: %w", err)
	}
	key = "alk_" + hex.EncodeToString(b)
	h := sha256.Sum256([]byte(key))
	return key, hex.EncodeToString(h[:]), nil
}

// LoadKeys reads the API keys file (JSON {"callers":[Caller, ...]}). Every caller needs a
// unique name, a principal or an approver (each a valid name), and exactly one of key (at
// least MinKeyBits strong) and key_sha256. Errors wrap ErrKeysFile or ErrWeakKey: the API
// must not start on them.
func LoadKeys(path string) (*Keys, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrKeysFile, path, err)
	}
	var f struct {
		Callers []Caller `json:"callers"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrKeysFile, path, err)
	}
	return NewKeys(f.Callers)
}

// NewKeys builds Keys from callers, checked as LoadKeys describes.
func NewKeys(callers []Caller) (*Keys, error) {
	k := &Keys{byHash: map[[32]byte]Caller{}}
	names := map[string]bool{}
	for i, c := range callers {
		if !callerName.MatchString(c.Name) || names[c.Name] {
			return nil, fmt.Errorf("%w: caller %d: a unique name matching %s is needed", ErrKeysFile, i+1, callerName)
		}
		names[c.Name] = true
		if c.Principal == "" && c.Approver == "" {
			return nil, fmt.Errorf("%w: caller %s: neither a principal nor an approver", ErrKeysFile, c.Name)
		}
		if c.Principal != "" && !clients.PrincipalPattern.MatchString(c.Principal) {
			return nil, fmt.Errorf("%w: caller %s: principal does not match %s", ErrKeysFile, c.Name, clients.PrincipalPattern)
		}
		if c.Approver != "" && !approvers.NamePattern.MatchString(c.Approver) {
			return nil, fmt.Errorf("%w: caller %s: approver does not match %s", ErrKeysFile, c.Name, approvers.NamePattern)
		}
		var h [32]byte
		switch {
		case c.Key != "" && c.KeySHA256 == "":
			if err := CheckStrength("the key of caller "+c.Name, c.Key); err != nil {
				return nil, err
			}
			h = sha256.Sum256([]byte(c.Key))
		case c.Key == "" && len(c.KeySHA256) == 64:
			b, err := hex.DecodeString(c.KeySHA256)
			if err != nil {
				return nil, fmt.Errorf("%w: caller %s: key_sha256 is not hex", ErrKeysFile, c.Name)
			}
			copy(h[:], b)
		default:
			return nil, fmt.Errorf("%w: caller %s: give exactly one of key and key_sha256 (64 hex digits)", ErrKeysFile, c.Name)
		}
		if _, dup := k.byHash[h]; dup {
			return nil, fmt.Errorf("%w: caller %s shares its key with another caller", ErrKeysFile, c.Name)
		}
		c.Key = ""
		k.byHash[h] = c
	}
	if len(k.byHash) == 0 {
		return nil, fmt.Errorf("%w: no callers", ErrKeysFile)
	}
	return k, nil
}

// lookup returns the caller whose key is key. Comparing SHA-256 digests through a map leaks
// nothing useful about the key by timing (an attacker would need preimages).
func (k *Keys) lookup(key string) (Caller, bool) {
	if key == "" || len(key) > 512 {
		return Caller{}, false
	}
	c, ok := k.byHash[sha256.Sum256([]byte(key))]
	return c, ok
}

// failureLimiter bounds failed authentications per client address: at most burst failures,
// refilled at one per interval; beyond that every request from the address (even one with a
// good key) is answered 429 until the bucket refills, so keys cannot be guessed at speed.
type failureLimiter struct {
	mu       sync.Mutex
	burst    float64
	interval time.Duration
	buckets  map[string]*bucket
	now      func() time.Time
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newFailureLimiter(burst int, interval time.Duration) *failureLimiter {
	return &failureLimiter{burst: float64(burst), interval: interval, buckets: map[string]*bucket{}, now: time.Now}
}

// blocked reports whether addr has no failures left (and for how long).
func (l *failureLimiter) blocked(addr string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refill(addr)
	if b.tokens >= 1 {
		return false, 0
	}
	return true, time.Duration((1 - b.tokens) * float64(l.interval))
}

// fail spends one failure of addr.
func (l *failureLimiter) fail(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refill(addr)
	b.tokens = math.Max(0, b.tokens-1)
	if len(l.buckets) > 100000 { // bound the memory a spray of addresses can take
		for k, v := range l.buckets {
			if v.tokens >= l.burst {
				delete(l.buckets, k)
			}
		}
	}
}

func (l *failureLimiter) refill(addr string) *bucket {
	now := l.now()
	b, ok := l.buckets[addr]
	if !ok {
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[addr] = b
	}
	b.tokens = math.Min(l.burst, b.tokens+float64(now.Sub(b.at))/float64(l.interval))
	b.at = now
	return b
}

// clientAddr is the address failures are counted against: the peer's IP (proxies are not
// trusted: a forwarded-for header is the client's to forge).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// AddCaller appends c to the API keys file at path (created owner-only when missing), after
// checking the whole file as LoadKeys does.
func AddCaller(path string, c Caller) error {
	var f struct {
		Callers []Caller `json:"callers"`
	}
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &f); err != nil {
			return fmt.Errorf("%w %s: %w", ErrKeysFile, path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w %s: %w", ErrKeysFile, path, err)
	}
	f.Callers = append(f.Callers, c)
	if _, err := NewKeys(f.Callers); err != nil {
		return err
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path+".tmp", append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("%w: %w", ErrKeysFile, err)
	}
	return os.Rename(path+".tmp", path)
}
