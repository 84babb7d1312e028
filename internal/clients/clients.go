// Package clients is who may start a turn, and for whom (issue 21, item 1).
//
// The clients file (default <AIRLOCK_HOME>/clients.json, AIRLOCK_CLIENTS) lists every
// registered requester credential: a name, the ed25519 public key of its private credential,
// and the principals it may speak for: exact names ("bob": a person's CLI) and prefix patterns
// ending in '*' ("user:*": a chat backend that authenticates its own users).
//
// A turn request carries an Attestation: an ed25519 signature, by the starter's credential,
// over the turn's conversation and sequence number, its principal, the digest of its message
// and system prompt, and the time it was signed. The worker verifies it (Set.Verify) before the
// turn's first inference and ends a turn whose request does not verify without calling the
// model. A principal is thereby proven, never typed: four-eyes rules compare the approver with
// the attested principal and with the credential that started the turn (SamePerson).
//
// The file holds only public material; private keys live in credential files readable by
// their owner alone (LoadCredential refuses any other mode), as with approvers.
package clients

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/internal/canonical"
	"github.com/airlock-dev/airlock/internal/privfile"
)

// File is the clients file's JSON shape.
type File struct {
	// Clients are the registered requester credentials.
	Clients []Client `json:"clients"`
}

// Client is one registered requester credential.
type Client struct {
	// Name identifies the credential in attestations, audits and on approver surfaces
	// (NamePattern). A person's own CLI credential is named after the person, so that four-eyes
	// rules know who started the turn whatever principal it speaks for.
	Name string `json:"name"`
	// PublicKey is the base64 (standard) ed25519 public key of the credential.
	PublicKey string `json:"public_key"`
	// Principals are the principals this credential may start turns for: exact principals, or
	// prefixes ending in '*' ("user:*"). A lone "*" is refused: no credential speaks for anyone.
	Principals []string `json:"principals"`
	// Gateway marks a credential that vouches for other clients' callers: `airlock mcp serve`
	// over HTTP signs each call it verified a bearer token for (CallAttestation), so the token
	// itself never enters a workflow's history. A gateway vouches only within its Principals,
	// and only for callers whose own client may speak for the principal.
	Gateway bool `json:"gateway,omitempty"`
}

// NamePattern is what a client name may be: a letter, then letters, digits, '.', '_', '-' or
// '@', 64 bytes at most (plain ASCII: names reach audits, terminals and pages).
var NamePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._@-]{0,63}$`)

// PrincipalPattern is what a turn's principal may be: a letter, then letters, digits, '.',
// '_', '-', '@' or ':' (a kind prefix such as "user:"), 128 bytes at most. An empty principal
// does not match: a turn without a principal is refused.
var PrincipalPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._@:-]{0,127}$`)

// scopePattern is a Client.Principals entry: a principal, or a principal prefix ending in '*'.
var scopePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._@:-]{0,127}\*?$`)

// Errors callers branch on.
var (
	// ErrNoFile: the clients file does not exist (wraps fs.ErrNotExist). No turn can start.
	ErrNoFile = errors.New("clients: no clients file")
	// ErrExists: Add for a name the file already has.
	ErrExists = errors.New("clients: name already in the clients file")
	// ErrNotFound: Remove or Find of a name the file does not have.
	ErrNotFound = errors.New("clients: no such client")
	// ErrFileMode: a clients file that group or others may write: whoever can write it can
	// speak for anybody, so no turn starts until it is fixed.
	ErrFileMode = errors.New("clients: the clients file must be writable by its owner only (chmod 600)")
	// ErrCredentialMode: a credential file readable or writable by others than its owner.
	ErrCredentialMode = errors.New("clients: credential file must be readable by its owner only (chmod 600)")
)

// Set is a parsed, validated clients file.
type Set struct {
	clients map[string]entry
}

type entry struct {
	Client
	key ed25519.PublicKey
}

// Parse validates a clients file: names match NamePattern and are unique, keys are 32-byte
// ed25519 keys, every client lists at least one principal scope, each a principal or a
// principal prefix ending in '*'.
func Parse(b []byte) (*Set, error) {
	var f File
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("clients: parse: %w", err)
	}
	// A repeated member ("groups" twice, a second "principals") means what a reader of the
	// file does not see: the decoder keeps the last. Refused, as trailing data is.
	if _, err := canonical.Canonicalize(b); err != nil {
		return nil, fmt.Errorf("clients: parse: %w", err)
	}
	s := &Set{clients: map[string]entry{}}
	for i, c := range f.Clients {
		if !NamePattern.MatchString(c.Name) {
			return nil, fmt.Errorf("clients: client %d: name %q does not match %s", i+1, c.Name, NamePattern)
		}
		if _, dup := s.clients[c.Name]; dup {
			return nil, fmt.Errorf("clients: client %q listed twice", c.Name)
		}
		k, err := base64.StdEncoding.DecodeString(c.PublicKey)
		if err != nil || len(k) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("clients: client %q: public_key is not a base64 ed25519 public key (%d bytes)", c.Name, ed25519.PublicKeySize)
		}
		if len(c.Principals) == 0 {
			return nil, fmt.Errorf("clients: client %q lists no principals it may speak for", c.Name)
		}
		for _, p := range c.Principals {
			if !scopePattern.MatchString(p) {
				return nil, fmt.Errorf("clients: client %q: principal %q is neither a principal nor a prefix ending in '*' (a lone '*' is refused)", c.Name, p)
			}
		}
		s.clients[c.Name] = entry{Client: c, key: ed25519.PublicKey(k)}
	}
	return s, nil
}

// Load reads and parses the clients file at path. Errors: ErrNoFile (with fs.ErrNotExist)
// when it is missing, ErrFileMode when others than its owner may write it, a parse error
// naming the path otherwise.
func Load(path string) (*Set, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w at %s (register one with `airlock clients add NAME --principal P`): %w", ErrNoFile, path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("clients: read %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("clients: read %s: %w", path, err)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %v", ErrFileMode, path, fi.Mode().Perm())
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("clients: read %s: %w", path, err)
	}
	s, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Names lists the registered clients, sorted.
func (s *Set) Names() []string {
	out := make([]string, 0, len(s.clients))
	for n := range s.clients {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Get returns the registration named name.
func (s *Set) Get(name string) (Client, bool) {
	e, ok := s.clients[name]
	return e.Client, ok
}

// MaySpeakFor reports whether client c's registration allows principal: an exact entry, or an
// entry "prefix*" with principal starting with prefix and longer than it. Scopes compare as
// written (a credential for "bob" cannot start turns as "BOB", whose policy grants are
// another principal's); four-eyes rules then compare without regard to case (SamePerson).
func (c Client) MaySpeakFor(principal string) bool {
	p := principal
	for _, sc := range c.Principals {
		if prefix, ok := strings.CutSuffix(sc, "*"); ok {
			if len(p) > len(prefix) && strings.HasPrefix(p, prefix) {
				return true
			}
		} else if p == sc {
			return true
		}
	}
	return false
}

// Source yields the current clients file, re-reading it when it changes on disk (another
// file renamed over it, its size or its modification time), so a registration added or
// removed while a worker runs counts at once. Safe for concurrent use.
type Source struct {
	file privfile.Watched[*Set]
}

// NewSource watches the clients file at path (which may not exist yet).
func NewSource(path string) *Source {
	return &Source{file: privfile.Watched[*Set]{Path: path, Load: Load}}
}

// Path is the watched file.
func (s *Source) Path() string { return s.file.Path }

// Current returns the parsed file. Errors: ErrNoFile, ErrFileMode or a parse error: turns
// then fail closed (no requester is authenticated) and the error says why.
func (s *Source) Current() (*Set, error) {
	set, err := s.file.Current()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w at %s (register one with `airlock clients add NAME --principal P`): %w", ErrNoFile, s.file.Path, err)
	}
	return set, err
}

// Static is a Source-like holder of a fixed Set (tests, the evaluation and the benchmark,
// which start their turns with an in-memory credential).
func Static(set *Set) func() (*Set, error) { return func() (*Set, error) { return set, nil } }

// SamePerson reports whether approver and principal name the same person for a four-eyes
// rule: compared case-insensitively, and a principal with a kind prefix ("user:bob") is the
// person after its last ':'. It errs towards "same": a rule that needs another person refuses
// more, never less.
func SamePerson(approver, principal string) bool {
	a, p := strings.ToLower(approver), strings.ToLower(principal)
	if a == "" || p == "" {
		return false
	}
	if i := strings.LastIndexByte(p, ':'); i >= 0 {
		p = p[i+1:]
	}
	if i := strings.LastIndexByte(a, ':'); i >= 0 {
		a = a[i+1:]
	}
	return a == p
}

// TurnID is the workflow id of turn seq of a conversation, "turn/<conversation>/<seq>"
// (workflows.TurnWorkflowID, which a test holds equal): an attestation names the turn through
// its conversation and sequence number.
func TurnID(conversation string, seq int) string {
	return fmt.Sprintf("turn/%s/%d", conversation, seq)
}

// Credential is a private ed25519 key that attests turn requests for the client Name.
type Credential struct {
	// Name is the client registration the key belongs to.
	Name string
	key  ed25519.PrivateKey
}

type credentialFile struct {
	Client     string `json:"client"`
	PrivateKey string `json:"private_key"` // base64 std, 64-byte ed25519 private key
}

// NewCredential generates a credential for the client name.
func NewCredential(name string) (Credential, error) {
	if !NamePattern.MatchString(name) {
		return Credential{}, fmt.Errorf("clients: name %q does not match %s", name, NamePattern)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Credential{}, fmt.Errorf("clients: generate key: %w", err)
	}
	return Credential{Name: name, key: priv}, nil
}

// Valid reports whether c holds a key (the zero Credential attests nothing).
func (c Credential) Valid() bool { return len(c.key) == ed25519.PrivateKeySize }

// Public is the credential's public key, base64 (standard), as the clients file lists it.
func (c Credential) Public() string {
	if !c.Valid() {
		return ""
	}
	return base64.StdEncoding.EncodeToString(c.key.Public().(ed25519.PublicKey))
}

// LoadCredential reads a client credential file. Errors: fs.ErrNotExist when missing,
// ErrCredentialMode when group or others may read or write it, a parse error otherwise.
func LoadCredential(path string) (Credential, error) {
	b, err := privfile.ReadOwnerOnly(path)
	if errors.Is(err, privfile.ErrMode) {
		return Credential{}, fmt.Errorf("%w (%w)", ErrCredentialMode, err)
	}
	if err != nil {
		return Credential{}, fmt.Errorf("clients: credential %s: %w", path, err)
	}
	var cf credentialFile
	if err := json.Unmarshal(b, &cf); err != nil {
		return Credential{}, fmt.Errorf("clients: credential %s: %w", path, err)
	}
	k, err := base64.StdEncoding.DecodeString(cf.PrivateKey)
	if err != nil || len(k) != ed25519.PrivateKeySize || !NamePattern.MatchString(cf.Client) {
		return Credential{}, fmt.Errorf("clients: credential %s: not a client credential (client name and base64 ed25519 private_key)", path)
	}
	return Credential{Name: cf.Client, key: ed25519.PrivateKey(k)}, nil
}

// SaveCredential writes c to path with mode 0600 (its directory 0700), never replacing an
// existing file (fs.ErrExist).
func SaveCredential(path string, c Credential) error {
	if !c.Valid() {
		return errors.New("clients: save an empty credential")
	}
	b, err := json.MarshalIndent(credentialFile{Client: c.Name, PrivateKey: base64.StdEncoding.EncodeToString(c.key)}, "", "  ")
	if err != nil {
		return fmt.Errorf("clients: %w", err)
	}
	if err := privfile.Create(path, append(b, '\n')); err != nil {
		return fmt.Errorf("clients: credential %s: %w", path, err)
	}
	return nil
}

// ReadFile returns the clients file at path as File (an empty File when it is missing), for
// editing.
func ReadFile(path string) (File, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return File{}, nil
	}
	if err != nil {
		return File{}, fmt.Errorf("clients: read %s: %w", path, err)
	}
	if _, err := Parse(b); err != nil {
		return File{}, fmt.Errorf("%s: %w", path, err)
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return File{}, fmt.Errorf("clients: %s: %w", path, err)
	}
	return f, nil
}

// WriteFile validates f and replaces the clients file at path atomically (mode 0600).
func WriteFile(path string, f File) error {
	if f.Clients == nil {
		f.Clients = []Client{}
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("clients: %w", err)
	}
	if _, err := Parse(b); err != nil {
		return err
	}
	if err := privfile.Replace(path, ".clients-*.json", append(b, '\n')); err != nil {
		return fmt.Errorf("clients: %w", err)
	}
	return nil
}

// Add puts client c into the file at path (creating it). Errors: ErrExists when the name is
// taken, a validation error for a bad registration.
func Add(path string, c Client) error {
	f, err := ReadFile(path)
	if err != nil {
		return err
	}
	for _, x := range f.Clients {
		if x.Name == c.Name {
			return fmt.Errorf("%w: client %q", ErrExists, c.Name)
		}
	}
	f.Clients = append(f.Clients, c)
	return WriteFile(path, f)
}

// Update replaces the client named c.Name (a rotated key, changed principals). Errors:
// ErrNotFound.
func Update(path string, c Client) error {
	f, err := ReadFile(path)
	if err != nil {
		return err
	}
	for i, x := range f.Clients {
		if x.Name == c.Name {
			f.Clients[i] = c
			return WriteFile(path, f)
		}
	}
	return fmt.Errorf("%w: %q", ErrNotFound, c.Name)
}

// Remove deletes the client named name from the file at path: workers (which re-read the
// file) refuse the turns it starts from then on. Errors: ErrNotFound.
func Remove(path, name string) error {
	f, err := ReadFile(path)
	if err != nil {
		return err
	}
	for i, x := range f.Clients {
		if x.Name == name {
			f.Clients = slices.Delete(f.Clients, i, i+1)
			return WriteFile(path, f)
		}
	}
	return fmt.Errorf("%w: %q", ErrNotFound, name)
}

// Find returns the client named name from the file at path.
func Find(path, name string) (Client, bool, error) {
	f, err := ReadFile(path)
	if err != nil {
		return Client{}, false, err
	}
	for _, x := range f.Clients {
		if x.Name == name {
			return x, true, nil
		}
	}
	return Client{}, false, nil
}

// Ephemeral builds an in-memory Set with one fresh credential for client name speaking for
// principals, for in-process starters (the evaluation, the benchmark, tests): nothing is
// written to disk.
func Ephemeral(name string, principals ...string) (*Set, Credential, error) {
	c, err := NewCredential(name)
	if err != nil {
		return nil, Credential{}, err
	}
	b, err := json.Marshal(File{Clients: []Client{{Name: name, PublicKey: c.Public(), Principals: principals}}})
	if err != nil {
		return nil, Credential{}, fmt.Errorf("clients: %w", err)
	}
	set, err := Parse(b)
	if err != nil {
		return nil, Credential{}, err
	}
	return set, c, nil
}

// digest is the hex SHA-256 of the length-prefixed fields.
func digest(fields ...string) string {
	h := sha256.New()
	for _, f := range fields {
		fmt.Fprintf(h, "%d:%s", len(f), f)
	}
	return hex.EncodeToString(h.Sum(nil))
}
