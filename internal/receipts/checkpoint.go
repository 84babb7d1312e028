package receipts

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// Checkpoint is the body of a C2SP tlog-checkpoint (https://c2sp.org/tlog-checkpoint): the
// log's origin, its size and its root hash. Signed, it is a signed note
// (https://c2sp.org/signed-note) whose signature lines name the key and its 4-byte key id.
type Checkpoint struct {
	// Origin identifies the log: a schema-less URL-like name, e.g. "airlock.example/receipts".
	Origin string
	Size   uint64
	// Root is the RFC 6962 root hash of the first Size leaves (HashSize bytes).
	Root []byte
}

// Errors of checkpoints; returned errors wrap them.
var (
	// ErrCheckpointFormat: the note body is not a tlog-checkpoint.
	ErrCheckpointFormat = errors.New("receipts: malformed checkpoint")
	// ErrSignature: no signature of the note verifies with a known key (note.Open's
	// UnverifiedNoteError and InvalidSignatureError).
	ErrSignature = errors.New("receipts: checkpoint signature does not verify")
)

// Body is the checkpoint's note text (C2SP tlog-checkpoint "Note text"): origin, decimal size
// and base64 root, each on its own line.
func (c Checkpoint) Body() string {
	return fmt.Sprintf("%s\n%d\n%s\n", c.Origin, c.Size, base64.StdEncoding.EncodeToString(c.Root))
}

// ParseCheckpoint reads a checkpoint body (extension lines after the root are ignored, as the
// format allows). An error wraps ErrCheckpointFormat.
func ParseCheckpoint(body string) (Checkpoint, error) {
	lines := strings.Split(body, "\n")
	if len(lines) < 4 || lines[len(lines)-1] != "" {
		return Checkpoint{}, fmt.Errorf("%w: want origin, size and root lines", ErrCheckpointFormat)
	}
	size, err := strconv.ParseUint(lines[1], 10, 64)
	if err != nil || lines[1] != strconv.FormatUint(size, 10) {
		return Checkpoint{}, fmt.Errorf("%w: size %q is not a decimal number", ErrCheckpointFormat, lines[1])
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != HashSize {
		return Checkpoint{}, fmt.Errorf("%w: root %q is not a base64 %d-byte hash", ErrCheckpointFormat, lines[2], HashSize)
	}
	if lines[0] == "" {
		return Checkpoint{}, fmt.Errorf("%w: empty origin", ErrCheckpointFormat)
	}
	return Checkpoint{Origin: lines[0], Size: size, Root: root}, nil
}

// Signer signs checkpoints with the log's Ed25519 key. The key's name is the log's origin.
type Signer struct {
	s note.Signer
}

// NewSigner parses a note signer key ("PRIVATE+KEY+<name>+<hash>+<key>", as GenerateKey makes).
func NewSigner(skey string) (*Signer, error) {
	s, err := note.NewSigner(strings.TrimSpace(skey))
	if err != nil {
		return nil, fmt.Errorf("receipts: signer key: %w", err)
	}
	return &Signer{s: s}, nil
}

// Origin is the log's origin: the key's name.
func (s *Signer) Origin() string { return s.s.Name() }

// KeyID is the key's 4-byte key id (signed-note key hash) as 8 hex digits.
func (s *Signer) KeyID() string { return fmt.Sprintf("%08x", s.s.KeyHash()) }

// Sign returns the signed note of the checkpoint of a tree of size and root, signed by s and
// any extra signers (a rotation's old and new keys sign one checkpoint together).
func (s *Signer) Sign(size uint64, root []byte, extra ...*Signer) ([]byte, error) {
	signers := []note.Signer{s.s}
	for _, e := range extra {
		signers = append(signers, e.s)
	}
	b, err := note.Sign(&note.Note{Text: Checkpoint{Origin: s.Origin(), Size: size, Root: root}.Body()}, signers...)
	if err != nil {
		return nil, fmt.Errorf("receipts: sign checkpoint %d: %w", size, err)
	}
	return b, nil
}

// GenerateKey makes a new Ed25519 log key named origin: the signer key (secret) and its
// verifier key ("<name>+<hash>+<key>", public, what a verifier is given).
func GenerateKey(origin string) (skey, vkey string, err error) {
	skey, vkey, err = note.GenerateKey(rand.Reader, origin)
	if err != nil {
		return "", "", fmt.Errorf("receipts: generate key %q: %w", origin, err)
	}
	return skey, vkey, nil
}

// Keyring is the set of verifier keys a verifier trusts: every key the log ever signed with,
// so checkpoints signed before a rotation still verify.
type Keyring struct {
	vs   note.Verifiers
	keys []string
}

// ParseKeyring reads verifier keys, one a line; blank lines and lines starting with "#" are
// skipped.
func ParseKeyring(text []byte) (*Keyring, error) {
	var list []note.Verifier
	var keys []string
	for i, line := range strings.Split(string(text), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := note.NewVerifier(line)
		if err != nil {
			return nil, fmt.Errorf("receipts: public key on line %d: %w", i+1, err)
		}
		list = append(list, v)
		keys = append(keys, line)
	}
	if len(list) == 0 {
		return nil, errors.New("receipts: no public key")
	}
	return &Keyring{vs: note.VerifierList(list...), keys: keys}, nil
}

// Keys are the keyring's verifier keys, in file order.
func (k *Keyring) Keys() []string { return k.keys }

// Open verifies a signed checkpoint note against k and parses it. It returns the checkpoint
// and the key ids ("name+hash" with 8 hex digits) whose signatures verified. Errors wrap
// ErrSignature or ErrCheckpointFormat.
func (k *Keyring) Open(signed []byte) (Checkpoint, []string, error) {
	n, err := note.Open(signed, k.vs)
	if err != nil {
		return Checkpoint{}, nil, fmt.Errorf("%w: %w", ErrSignature, err)
	}
	c, err := ParseCheckpoint(n.Text)
	if err != nil {
		return Checkpoint{}, nil, err
	}
	var ids []string
	for _, s := range n.Sigs {
		ids = append(ids, fmt.Sprintf("%s+%08x", s.Name, s.Hash))
	}
	if ids == nil {
		return Checkpoint{}, nil, fmt.Errorf("%w: no signature", ErrSignature)
	}
	for _, s := range n.Sigs {
		if s.Name != c.Origin {
			return Checkpoint{}, nil, fmt.Errorf("%w: signed by %q, not by the log %q", ErrSignature, s.Name, c.Origin)
		}
	}
	return c, ids, nil
}

// sameHash compares two hashes.
func sameHash(a, b []byte) bool { return bytes.Equal(a, b) }
