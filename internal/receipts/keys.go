package receipts

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/internal/privfile"
)

// Key files in the Airlock home, beside the approver key.
const (
	// KeyFile holds the log's signer key (secret, mode 0600).
	KeyFile = "receipts.key"
	// PublicFile holds every verifier key the log ever signed with, one a line, newest last:
	// what an operator hands to whoever verifies (mode 0600 like every Airlock file; copy it
	// out to publish it).
	PublicFile = "receipts.pub"
	// DefaultOrigin is the log's origin (and key name) unless AIRLOCK_RECEIPTS_ORIGIN names one.
	DefaultOrigin = "airlock.local/receipts"
)

// ErrNoKey: the log key file does not exist (a worker creates it).
var ErrNoKey = errors.New("receipts: no log key")

// Origin is AIRLOCK_RECEIPTS_ORIGIN or DefaultOrigin.
func Origin() string {
	if o := strings.TrimSpace(os.Getenv("AIRLOCK_RECEIPTS_ORIGIN")); o != "" {
		return o
	}
	return DefaultOrigin
}

// LoadKey reads the signer key in home. A missing file wraps ErrNoKey; a file others may read
// wraps privfile.ErrMode.
func LoadKey(home string) (*Signer, error) {
	path := filepath.Join(home, KeyFile)
	b, err := privfile.ReadOwnerOnly(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s does not exist (a worker creates it)", ErrNoKey, path)
	}
	if err != nil {
		return nil, fmt.Errorf("receipts: read %s: %w", path, err)
	}
	s, err := NewSigner(string(b))
	if err != nil {
		return nil, fmt.Errorf("receipts: %s: %w", path, err)
	}
	return s, nil
}

// LoadOrCreateKey is LoadKey, creating the key (named origin) and the public file when none
// exists yet. Two processes racing to create it end with one key: the loser reads the
// winner's.
func LoadOrCreateKey(home, origin string) (*Signer, error) {
	s, err := LoadKey(home)
	if !errors.Is(err, ErrNoKey) {
		return s, err
	}
	skey, vkey, err := GenerateKey(origin)
	if err != nil {
		return nil, err
	}
	if err := privfile.Create(filepath.Join(home, KeyFile), []byte(skey+"\n")); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("receipts: create the log key: %w", err)
	} else if err != nil {
		return LoadKey(home)
	}
	if err := addPublic(home, vkey); err != nil {
		return nil, err
	}
	return LoadKey(home)
}

// LoadKeyring reads the verifier keys of a public file (PublicFile's format).
func LoadKeyring(path string) (*Keyring, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("receipts: read public keys: %w", err)
	}
	k, err := ParseKeyring(b)
	if err != nil {
		return nil, fmt.Errorf("receipts: %s: %w", path, err)
	}
	return k, nil
}

// RotateKey replaces the log key in home with a new one of the same origin and adds its
// verifier key to the public file, which keeps the old ones: checkpoints signed before the
// rotation still verify. It returns the old and the new signer, so the caller can sign one
// checkpoint with both (the handover). The old secret key is not kept.
func RotateKey(home string) (old, next *Signer, err error) {
	old, err = LoadKey(home)
	if err != nil {
		return nil, nil, err
	}
	skey, vkey, err := GenerateKey(old.Origin())
	if err != nil {
		return nil, nil, err
	}
	// The public key first: a crash between the two leaves a key nobody signed with yet
	// listed, never a signing key no verifier knows.
	if err := addPublic(home, vkey); err != nil {
		return nil, nil, err
	}
	if err := privfile.Replace(filepath.Join(home, KeyFile), ".receipts-*.key", []byte(skey+"\n")); err != nil {
		return nil, nil, fmt.Errorf("receipts: replace the log key: %w", err)
	}
	next, err = NewSigner(skey)
	return old, next, err
}

// addPublic appends vkey to home's public file (created when missing).
func addPublic(home, vkey string) error {
	path := filepath.Join(home, PublicFile)
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("receipts: read %s: %w", path, err)
	}
	if strings.Contains(string(b), vkey) {
		return nil
	}
	text := string(b)
	if text == "" {
		text = "# verifier keys of the Airlock receipts log (airlock audit verify --key), oldest first\n"
	}
	if err := privfile.Replace(path, ".receipts-*.pub", []byte(text+vkey+"\n")); err != nil {
		return fmt.Errorf("receipts: write %s: %w", path, err)
	}
	return nil
}
