// Package token mints, hashes and seals confirmation tokens (RFC-0004 "confirmation tokens":
// random, at least 128 bits, stored hashed, single-use, time-bounded, never seen by the model).
//
// The store keeps only SHA-256(token). So that approvers can still act on a pending
// confirmation, the plaintext is also sealed with AES-256-GCM under the approver key, which
// only approver surfaces (CLI, web page) and the worker hold: a copy of the database alone
// yields neither usable tokens nor a way to forge one.
package token

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Bytes is the token entropy: 256 bits (the floor is 128).
const Bytes = 32

// ErrKey reports an unusable approver key.
var ErrKey = errors.New("token: invalid approver key")

// ErrSealed reports a sealed token that does not open under the key.
var ErrSealed = errors.New("token: sealed token does not open")

// Mint returns a new token (base64url, no padding) from crypto/rand and its hash.
func Mint() (plain string, hash []byte, err error) {
	b := make([]byte, Bytes)
	if _, err := rand.Read(b); err != nil {
		return "", nil, fmt.Errorf("token: mint: %w", err)
	}
	plain = base64.RawURLEncoding.EncodeToString(b)
	return plain, Hash(plain), nil
}

// Hash is SHA-256 of the token text: what the store keeps and looks tokens up by.
func Hash(plain string) []byte {
	h := sha256.Sum256([]byte(plain))
	return h[:]
}

// Equal compares two hashes in constant time.
func Equal(a, b []byte) bool { return subtle.ConstantTimeCompare(a, b) == 1 }

// Key is a 32-byte AES-256 approver key.
type Key [32]byte

// ParseKey decodes a key from 64 hex characters.
func ParseKey(s string) (Key, error) {
	var k Key
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != len(k) {
		return k, fmt.Errorf("%w: want 64 hex characters", ErrKey)
	}
	copy(k[:], b)
	return k, nil
}

// ErrNoKey reports an approver key file that does not exist where an approver surface looks.
var ErrNoKey = errors.New("token: no approver key")

// LoadKey reads the hex key at path; it never creates one. Errors: ErrNoKey naming the path
// when the file is missing (start a worker, which creates it, or set AIRLOCK_APPROVER_KEY),
// ErrKey when its content is not a key.
func LoadKey(path string) (Key, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Key{}, fmt.Errorf("%w at %s: a worker creates it on first start; approver surfaces need the same key (AIRLOCK_APPROVER_KEY_FILE or AIRLOCK_APPROVER_KEY)", ErrNoKey, path)
	}
	if err != nil {
		return Key{}, fmt.Errorf("token: read approver key %s: %w", path, err)
	}
	return ParseKey(string(b))
}

// LoadOrCreateKey reads the hex key at path, creating it (mode 0600, parent 0700) with a fresh
// random key when absent: the zero-setup default for a local stack.
func LoadOrCreateKey(path string) (Key, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return ParseKey(string(b))
	}
	if !errors.Is(err, os.ErrNotExist) {
		return Key{}, fmt.Errorf("token: read approver key %s: %w", path, err)
	}
	var k Key
	if _, err := rand.Read(k[:]); err != nil {
		return k, fmt.Errorf("token: new approver key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return k, fmt.Errorf("token: approver key dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) { // another process created it first: use theirs
		return LoadOrCreateKey(path)
	}
	if err != nil {
		return k, fmt.Errorf("token: write approver key %s: %w", path, err)
	}
	defer f.Close()
	if _, err := f.WriteString(hex.EncodeToString(k[:]) + "\n"); err != nil {
		return k, fmt.Errorf("token: write approver key %s: %w", path, err)
	}
	return k, f.Sync()
}

// Seal encrypts the token for approvers; aad binds the ciphertext to its confirmation id so a
// sealed token cannot be moved to another confirmation row.
func Seal(k Key, plain, aad string) ([]byte, error) {
	g, err := gcm(k)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, g.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("token: seal: %w", err)
	}
	return g.Seal(nonce, nonce, []byte(plain), []byte(aad)), nil
}

// Open decrypts a sealed token. Errors: ErrSealed.
func Open(k Key, sealed []byte, aad string) (string, error) {
	g, err := gcm(k)
	if err != nil {
		return "", err
	}
	if len(sealed) < g.NonceSize() {
		return "", ErrSealed
	}
	p, err := g.Open(nil, sealed[:g.NonceSize()], sealed[g.NonceSize():], []byte(aad))
	if err != nil {
		return "", ErrSealed
	}
	return string(p), nil
}

func gcm(k Key) (cipher.AEAD, error) {
	b, err := aes.NewCipher(k[:])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	return cipher.NewGCM(b)
}
