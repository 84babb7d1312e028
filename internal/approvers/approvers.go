// Package approvers is who may decide a confirmation, and how a decision proves who made it.
//
// The approvers file (default <AIRLOCK_HOME>/approvers.json, AIRLOCK_APPROVERS) lists every
// approver: a name, a bcrypt hash of the password they sign in to the approver page with, and
// the ed25519 public key of the credential the CLI decides with. It also lists surfaces: an
// approver page's own ed25519 key, with which it vouches for the approver it signed in.
//
// Every decision carries an Attestation: an ed25519 signature over the decision MAC (which
// binds the confirmation, the decision, the approver, the reason, the argument digest and a
// nonce) by the approver's own credential or a surface's. The worker verifies it against the
// approvers file before it judges anything else, so an approver name is never a claim: a
// holder of the approver key (who can open tokens) still cannot decide as someone else, and a
// four-eyes rule compares identities that were proven, not typed (issue 8, item 2).
//
// The file holds only public material and bcrypt hashes; private keys live in credential
// files readable by their owner alone (LoadCredential refuses any other mode).
package approvers

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
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/airlock-dev/airlock/internal/canonical"
	"github.com/airlock-dev/airlock/internal/privfile"
)

// File is the approvers file's JSON shape.
type File struct {
	// Approvers are the people who may decide confirmations.
	Approvers []Approver `json:"approvers"`
	// Surfaces are approver pages that vouch for the approvers they sign in.
	Surfaces []Surface `json:"surfaces,omitempty"`
}

// Approver is one person who may decide confirmations.
type Approver struct {
	// Name is the identity recorded in the audit and compared by four-eyes rules (NamePattern).
	Name string `json:"name"`
	// PasswordBcrypt is the bcrypt hash of the approver page password; empty: no web sign-in.
	PasswordBcrypt string `json:"password_bcrypt,omitempty"`
	// PublicKey is the base64 (standard) ed25519 public key of the approver's CLI credential;
	// empty: no CLI credential.
	PublicKey string `json:"public_key,omitempty"`
	// Groups are the approver groups this approver belongs to (NamePattern each): a policy
	// entry's "approval/groups" lets only their members decide its confirmations (issue 21).
	Groups []string `json:"groups,omitempty"`
	// Principals are the other names this same person goes by on requester surfaces: turn
	// principals ("user:alice@corp", a chat backend's user) and client names. Four-eyes rules
	// and quorums compare persons (Set.SamePerson), so a request by one of these principals is
	// this approver's own (issue 33, item 3). Each matches clients.PrincipalPattern and belongs
	// to one approver only.
	Principals []string `json:"principals,omitempty"`
	// Subject binds this file approver to an identity provider account: "<issuer>#<sub>" (the
	// ID token's iss and sub). The approver page's OIDC sign-in of that account is this
	// approver; another account whose claims name this approver is refused, so one name never
	// means two people (issue 33, item 1). Empty: no OIDC account is this approver.
	Subject string `json:"oidc_subject,omitempty"`
	// ValidUntil marks an approver the approver page signed in through the identity provider
	// (UpsertProvider): it counts, with these groups, only until then; the page extends it at
	// each check with the provider and removes the entry when the provider no longer vouches
	// for the person (issue 33, item 1). Nil: a file approver, valid until removed.
	ValidUntil *time.Time `json:"valid_until,omitempty"`
}

// Surface is an approver page: its key attests decisions for the approver signed in on it.
type Surface struct {
	// Name names the surface ("web"); attestations say "surface:<name>".
	Name string `json:"name"`
	// PublicKey is the base64 (standard) ed25519 public key.
	PublicKey string `json:"public_key"`
}

// NamePattern is what an approver or surface name may be: a letter, then letters, digits,
// '.', '_', '-' or '@', 64 bytes at most. Names reach audits, terminals and web pages, so they
// are plain ASCII by construction.
var NamePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._@-]{0,63}$`)

// Errors callers branch on.
var (
	// ErrNoFile: the approvers file does not exist (wraps fs.ErrNotExist). Nobody can decide.
	ErrNoFile = errors.New("approvers: no approvers file")
	// ErrBadCredentials: unknown approver or wrong password (the two are not told apart).
	ErrBadCredentials = errors.New("approvers: unknown approver or wrong password")
	// ErrUnauthenticated: a decision's attestation does not prove its approver.
	ErrUnauthenticated = errors.New("approvers: decision not attested by its approver or a surface")
	// ErrExists: AddApprover or AddSurface for a name the file already has.
	ErrExists = errors.New("approvers: name already in the approvers file")
	// ErrFileMode: an approvers file that group or others may write: whoever can write it can
	// make themselves an approver, so nobody is authenticated until it is fixed.
	ErrFileMode = errors.New("approvers: the approvers file must be writable by its owner only (chmod 600)")
	// ErrCredentialMode: a credential file readable or writable by others than its owner.
	ErrCredentialMode = errors.New("approvers: credential file must be readable by its owner only (chmod 600)")
)

// Set is a parsed, validated approvers file.
type Set struct {
	approvers map[string]Approver
	keys      map[string]ed25519.PublicKey // "approver:<name>" / "surface:<name>"
	persons   map[string]string            // lower-cased principal -> approver name
	subjects  map[string]string            // "<issuer>#<sub>" -> approver name
}

// principalPattern is clients.PrincipalPattern (a test holds them equal): what a turn's
// principal may be.
var principalPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._@:-]{0,127}$`)

// subjectPattern is an oidc_subject: an https (or loopback http) issuer URL, '#', and the
// provider's subject (printable ASCII, 255 bytes at most).
var subjectPattern = regexp.MustCompile(`^https?://[!-"$-~]{1,512}#[!-~]{1,255}$`)

// PersonOf is the person an identity names (issue 33, item 3): an approver's name, a principal
// an approver lists (Approver.Principals) or a client name resolve to "approver:<name>"; any
// other identity to itself, lower-cased, after its last ':' ("user:bob" is "bob"), as
// clients.SamePerson compares.
func (s *Set) PersonOf(identity string) string {
	if s != nil {
		for n := range s.approvers {
			if strings.EqualFold(n, identity) {
				return "approver:" + strings.ToLower(n)
			}
		}
		if n, ok := s.persons[strings.ToLower(identity)]; ok {
			return "approver:" + strings.ToLower(n)
		}
	}
	p := strings.ToLower(identity)
	if i := strings.LastIndexByte(p, ':'); i >= 0 {
		p = p[i+1:]
	}
	if s != nil {
		if _, ok := s.approvers[p]; ok {
			return "approver:" + p
		}
		for n := range s.approvers {
			if strings.EqualFold(n, p) {
				return "approver:" + strings.ToLower(n)
			}
		}
	}
	return p
}

// SamePerson reports whether two identities (an approver, a requester principal or client
// name) are one person for a four-eyes rule or a quorum: they resolve to the same PersonOf, or
// compare equal as clients.SamePerson does. It errs towards "same": a rule that needs another
// person refuses more, never less. An empty identity is nobody (false).
func (s *Set) SamePerson(x, y string) bool {
	if x == "" || y == "" {
		return false
	}
	return s.PersonOf(x) == s.PersonOf(y) || legacySame(x, y)
}

// legacySame is clients.SamePerson (compared case-insensitively after the last ':').
func legacySame(x, y string) bool {
	a, b := strings.ToLower(x), strings.ToLower(y)
	if i := strings.LastIndexByte(a, ':'); i >= 0 {
		a = a[i+1:]
	}
	if i := strings.LastIndexByte(b, ':'); i >= 0 {
		b = b[i+1:]
	}
	return a == b
}

// BySubject returns the file approver bound to an identity provider account
// ("<issuer>#<sub>", Approver.Subject).
func (s *Set) BySubject(subject string) (string, bool) {
	n, ok := s.subjects[subject]
	return n, ok
}

// ProviderAccount reports whether approver's entry was recorded by the approver page for an
// identity provider account (it has a ValidUntil), rather than written by an administrator.
func (s *Set) ProviderAccount(approver string) bool { return s.approvers[approver].ValidUntil != nil }

// SubjectOf returns the oidc_subject of approver ("" when none).
func (s *Set) SubjectOf(approver string) string { return s.approvers[approver].Subject }

// Parse validates an approvers file: names match NamePattern and are unique per kind, public
// keys are 32-byte ed25519 keys, hashes are bcrypt hashes.
func Parse(b []byte) (*Set, error) {
	var f File
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("approvers: parse: %w", err)
	}
	// A repeated member ("groups" twice, a second "principals") means what a reader of the
	// file does not see: the decoder keeps the last. Refused, as trailing data is.
	if _, err := canonical.Canonicalize(b); err != nil {
		return nil, fmt.Errorf("approvers: parse: %w", err)
	}
	s := &Set{approvers: map[string]Approver{}, keys: map[string]ed25519.PublicKey{}, persons: map[string]string{}, subjects: map[string]string{}}
	for i, a := range f.Approvers {
		if !NamePattern.MatchString(a.Name) {
			return nil, fmt.Errorf("approvers: approver %d: name %q does not match %s", i+1, a.Name, NamePattern)
		}
		if _, dup := s.approvers[a.Name]; dup {
			return nil, fmt.Errorf("approvers: approver %q listed twice", a.Name)
		}
		for n := range s.approvers {
			// Four-eyes rules and quorums compare names without regard to case: two approvers
			// whose names differ only in case would be one person to them.
			if strings.EqualFold(n, a.Name) {
				return nil, fmt.Errorf("approvers: approvers %q and %q differ only in case", n, a.Name)
			}
		}
		for _, g := range a.Groups {
			if !NamePattern.MatchString(g) {
				return nil, fmt.Errorf("approvers: approver %q: group %q does not match %s", a.Name, g, NamePattern)
			}
		}
		for _, p := range a.Principals {
			if !principalPattern.MatchString(p) {
				return nil, fmt.Errorf("approvers: approver %q: principal %q does not match %s", a.Name, p, principalPattern)
			}
			key := strings.ToLower(p)
			if other, dup := s.persons[key]; dup && other != a.Name {
				return nil, fmt.Errorf("approvers: principal %q is listed by approvers %q and %q: one name must mean one person", p, other, a.Name)
			}
			s.persons[key] = a.Name
		}
		if a.ValidUntil != nil && a.Subject == "" {
			return nil, fmt.Errorf("approvers: approver %q: valid_until without oidc_subject", a.Name)
		}
		if a.Subject != "" {
			if !subjectPattern.MatchString(a.Subject) {
				return nil, fmt.Errorf("approvers: approver %q: oidc_subject %q is not \"<issuer>#<sub>\"", a.Name, a.Subject)
			}
			if other, dup := s.subjects[a.Subject]; dup {
				return nil, fmt.Errorf("approvers: oidc_subject %q is bound to approvers %q and %q", a.Subject, other, a.Name)
			}
			s.subjects[a.Subject] = a.Name
		}
		if a.PasswordBcrypt != "" {
			if _, err := bcrypt.Cost([]byte(a.PasswordBcrypt)); err != nil {
				return nil, fmt.Errorf("approvers: approver %q: password_bcrypt is not a bcrypt hash: %w", a.Name, err)
			}
		}
		if a.PublicKey != "" {
			k, err := parseKey(a.PublicKey)
			if err != nil {
				return nil, fmt.Errorf("approvers: approver %q: %w", a.Name, err)
			}
			s.keys["approver:"+a.Name] = k
		}
		s.approvers[a.Name] = a
	}
	// A principal that is another approver's name would make that name mean two people.
	for p, owner := range s.persons {
		for n := range s.approvers {
			if n != owner && strings.EqualFold(n, p) {
				return nil, fmt.Errorf("approvers: approver %q lists principal %q, which is approver %q: one name must mean one person", owner, p, n)
			}
		}
	}
	for i, sf := range f.Surfaces {
		if !NamePattern.MatchString(sf.Name) {
			return nil, fmt.Errorf("approvers: surface %d: name %q does not match %s", i+1, sf.Name, NamePattern)
		}
		id := "surface:" + sf.Name
		if _, dup := s.keys[id]; dup {
			return nil, fmt.Errorf("approvers: surface %q listed twice", sf.Name)
		}
		k, err := parseKey(sf.PublicKey)
		if err != nil {
			return nil, fmt.Errorf("approvers: surface %q: %w", sf.Name, err)
		}
		s.keys[id] = k
	}
	return s, nil
}

func parseKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public_key is not a base64 ed25519 public key (%d bytes)", ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// Load reads and parses the approvers file at path. Errors: ErrNoFile (with fs.ErrNotExist)
// when it is missing, ErrFileMode when others than its owner may write it, a parse error
// naming the path otherwise.
func Load(path string) (*Set, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w at %s (create one with `airlock approvers add NAME`): %w", ErrNoFile, path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("approvers: read %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("approvers: read %s: %w", path, err)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %v", ErrFileMode, path, fi.Mode().Perm())
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("approvers: read %s: %w", path, err)
	}
	s, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Names lists the approvers, sorted.
func (s *Set) Names() []string {
	out := make([]string, 0, len(s.approvers))
	for n := range s.approvers {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Eligible reports whether approver may decide for a capability whose policy names groups:
// every approver when groups is empty, else a member of at least one of them.
func (s *Set) Eligible(approver string, groups []string) bool {
	a, ok := s.approvers[approver]
	if !ok || !live(a) {
		return false
	}
	if len(groups) == 0 {
		return true
	}
	for _, g := range a.Groups {
		if slices.Contains(groups, g) {
			return true
		}
	}
	return false
}

// PasswordStamp is a value that changes whenever approver's page password does (a digest of
// its bcrypt hash, whose salt is new with every password): the approver page ends the
// sessions signed in before a change (issue 21). "" for an approver without a password.
func (s *Set) PasswordStamp(approver string) string {
	h := s.approvers[approver].PasswordBcrypt
	if h == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(h))
	return hex.EncodeToString(sum[:8])
}

// GroupsOf returns the groups of approver (nil for an unknown approver or one in none).
func (s *Set) GroupsOf(approver string) []string {
	return slices.Clone(s.approvers[approver].Groups)
}

// EligibleNames lists the approvers who may decide for groups (Eligible), sorted.
func (s *Set) EligibleNames(groups []string) []string {
	var out []string
	for _, n := range s.Names() {
		if s.Eligible(n, groups) {
			out = append(out, n)
		}
	}
	return out
}

// Has reports whether name is an approver now (a provider account's entry counts until its
// ValidUntil).
func (s *Set) Has(name string) bool { a, ok := s.approvers[name]; return ok && live(a) }

// live reports whether a's entry counts now: a file approver always, a provider account until
// its ValidUntil.
func live(a Approver) bool { return a.ValidUntil == nil || time.Now().Before(*a.ValidUntil) }

// ErrNotProvider: UpsertProvider would replace a file approver, or a provider account of
// another person, of the same name (one name never means two people).
var ErrNotProvider = errors.New("approvers: the name belongs to another person")

// UpsertProvider records, in the file at path, an approver the page signed in through the
// identity provider: a.Subject and a.ValidUntil are required. An entry of the same name (in
// any case) is replaced only when it is the same person's provider entry (same Subject);
// any other is ErrNotProvider. A principal or subject another approver holds is refused by
// Parse as ever.
func UpsertProvider(path string, a Approver) error {
	if a.Subject == "" || a.ValidUntil == nil {
		return errors.New("approvers: a provider account needs its oidc_subject and valid_until")
	}
	f, err := ReadFile(path)
	if err != nil {
		return err
	}
	for i, x := range f.Approvers {
		if !strings.EqualFold(x.Name, a.Name) {
			continue
		}
		if x.Subject != a.Subject {
			return fmt.Errorf("%w: %q is in %s as another person", ErrNotProvider, a.Name, path)
		}
		if x.ValidUntil == nil {
			// A file approver bound to this subject: the file keeps its entry (its groups,
			// credentials); the page vouches for the person through the binding.
			return nil
		}
		a.PublicKey, a.PasswordBcrypt, a.Principals = x.PublicKey, x.PasswordBcrypt, x.Principals
		f.Approvers[i] = a
		return WriteFile(path, f)
	}
	f.Approvers = append(f.Approvers, a)
	return WriteFile(path, f)
}

// RemoveProvider deletes the provider entry of name for subject from the file at path (the
// provider no longer vouches for the person); file approvers and other people's entries are
// left alone. It reports whether it removed one.
func RemoveProvider(path, name, subject string) (bool, error) {
	f, err := ReadFile(path)
	if err != nil {
		return false, err
	}
	for i, x := range f.Approvers {
		if x.Name == name && x.Subject == subject && x.ValidUntil != nil {
			f.Approvers = slices.Delete(f.Approvers, i, i+1)
			return true, WriteFile(path, f)
		}
	}
	return false, nil
}

// dummyHash keeps Authenticate's time the same for unknown names (no user enumeration by timing).
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("airlock: no such approver"), bcrypt.DefaultCost)

// Authenticate checks an approver page sign-in. It returns the approver's name. Errors:
// ErrBadCredentials for an unknown name, an approver without a password or a wrong password,
// after the same bcrypt work in every case.
func (s *Set) Authenticate(name, password string) (string, error) {
	a, ok := s.approvers[name]
	hash := []byte(a.PasswordBcrypt)
	if !ok || len(hash) == 0 {
		hash = dummyHash
	}
	if err := bcrypt.CompareHashAndPassword(hash, []byte(password)); err != nil || !ok || a.PasswordBcrypt == "" {
		return "", ErrBadCredentials
	}
	return a.Name, nil
}

// Attestation proves who made a decision: Signer is "approver:<name>" (the approver's own
// credential) or "surface:<name>" (an approver page vouching for its signed-in approver);
// Signature is base64url (no padding) ed25519 over AttestationMessage.
type Attestation struct {
	Signer    string `json:"signer"`
	Signature string `json:"signature"`
}

// attestationLabel separates attestations from any other use of the keys.
const attestationLabel = "airlock attestation v1"

// AttestationMessage is what an attestation signs: the label, the confirmation id and the
// decision MAC, length-prefixed. The MAC binds every field of the decision (token.Decision),
// so the signature covers them all without a second encoding of each.
func AttestationMessage(confirmationID, mac string) []byte {
	var b bytes.Buffer
	for _, f := range []string{attestationLabel, confirmationID, mac} {
		fmt.Fprintf(&b, "%d:%s", len(f), f)
	}
	return b.Bytes()
}

// Verify checks that att proves approver made the decision with this MAC: approver is in the
// file, and att is signed by approver's own credential or by a listed surface. Errors:
// ErrUnauthenticated, wrapped with why.
func (s *Set) Verify(approver, confirmationID, mac string, att Attestation) error {
	if !s.Has(approver) {
		return fmt.Errorf("%w: %q is not in the approvers file", ErrUnauthenticated, approver)
	}
	switch {
	case att.Signer == "approver:"+approver:
	case len(att.Signer) > len("surface:") && att.Signer[:len("surface:")] == "surface:":
	case att.Signer == "":
		return fmt.Errorf("%w: the decision carries no attestation", ErrUnauthenticated)
	default:
		return fmt.Errorf("%w: signed by %q, which cannot decide as %q", ErrUnauthenticated, att.Signer, approver)
	}
	k, ok := s.keys[att.Signer]
	if !ok {
		return fmt.Errorf("%w: no key for %q in the approvers file", ErrUnauthenticated, att.Signer)
	}
	sig, err := base64.RawURLEncoding.DecodeString(att.Signature)
	if err != nil || !ed25519.Verify(k, AttestationMessage(confirmationID, mac), sig) {
		return fmt.Errorf("%w: the signature of %q does not verify", ErrUnauthenticated, att.Signer)
	}
	return nil
}

// Source yields the current approvers file, re-reading it when it changes on disk (another
// file renamed over it, its size or its modification time), so approvers added while a worker runs count at once. Safe for
// concurrent use.
type Source struct {
	file privfile.Watched[*Set]
}

// NewSource watches the approvers file at path (which may not exist yet).
func NewSource(path string) *Source {
	return &Source{file: privfile.Watched[*Set]{Path: path, Load: Load}}
}

// Path is the watched file.
func (s *Source) Path() string { return s.file.Path }

// Current returns the parsed file. Errors: ErrNoFile, or a parse error: decisions then fail
// closed (nobody is authenticated) and the error says why.
func (s *Source) Current() (*Set, error) {
	set, err := s.file.Current()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w at %s (create one with `airlock approvers add NAME`): %w", ErrNoFile, s.file.Path, err)
	}
	return set, err
}

// Static is a Source-like holder of a fixed Set (tests, the evaluation's in-process approver).
func Static(set *Set) func() (*Set, error) { return func() (*Set, error) { return set, nil } }

// Credential is a private ed25519 key that attests decisions: an approver's own (Signer
// "approver:<name>") or a surface's ("surface:<name>").
type Credential struct {
	// Signer names the key's owner as attestations do.
	Signer string
	key    ed25519.PrivateKey
}

// credentialFile is a credential's JSON shape on disk (mode 0600).
type credentialFile struct {
	Signer     string `json:"signer"`
	PrivateKey string `json:"private_key"` // base64 std, 64-byte ed25519 private key
}

// Attest signs the decision with this MAC on confirmationID.
func (c Credential) Attest(confirmationID, mac string) Attestation {
	sig := ed25519.Sign(c.key, AttestationMessage(confirmationID, mac))
	return Attestation{Signer: c.Signer, Signature: base64.RawURLEncoding.EncodeToString(sig)}
}

// Public is the credential's public key, base64 (standard), as the approvers file lists it.
func (c Credential) Public() string {
	return base64.StdEncoding.EncodeToString(c.key.Public().(ed25519.PublicKey))
}

// Valid reports whether c holds a key (the zero Credential attests nothing).
func (c Credential) Valid() bool { return len(c.key) == ed25519.PrivateKeySize }

// NewCredential generates a credential for signer ("approver:<name>" or "surface:<name>").
func NewCredential(signer string) (Credential, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Credential{}, fmt.Errorf("approvers: generate key: %w", err)
	}
	return Credential{Signer: signer, key: priv}, nil
}

// LoadCredential reads a credential file. Errors: fs.ErrNotExist when missing,
// ErrCredentialMode when group or others may read or write it, a parse error otherwise.
func LoadCredential(path string) (Credential, error) {
	b, err := privfile.ReadOwnerOnly(path)
	if errors.Is(err, privfile.ErrMode) {
		return Credential{}, fmt.Errorf("%w (%w)", ErrCredentialMode, err)
	}
	if err != nil {
		return Credential{}, fmt.Errorf("approvers: credential %s: %w", path, err)
	}
	var cf credentialFile
	if err := json.Unmarshal(b, &cf); err != nil {
		return Credential{}, fmt.Errorf("approvers: credential %s: %w", path, err)
	}
	k, err := base64.StdEncoding.DecodeString(cf.PrivateKey)
	if err != nil || len(k) != ed25519.PrivateKeySize {
		return Credential{}, fmt.Errorf("approvers: credential %s: private_key is not a base64 ed25519 private key", path)
	}
	return Credential{Signer: cf.Signer, key: ed25519.PrivateKey(k)}, nil
}

// SaveCredential writes c to path with mode 0600 (its directory 0700), never replacing an
// existing file (fs.ErrExist).
func SaveCredential(path string, c Credential) error {
	b, err := json.MarshalIndent(credentialFile{Signer: c.Signer, PrivateKey: base64.StdEncoding.EncodeToString(c.key)}, "", "  ")
	if err != nil {
		return fmt.Errorf("approvers: %w", err)
	}
	if err := privfile.Create(path, append(b, '\n')); err != nil {
		return fmt.Errorf("approvers: credential %s: %w", path, err)
	}
	return nil
}

// ReadFile returns the approvers file at path as File (an empty File when it is missing), for
// editing.
func ReadFile(path string) (File, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return File{}, nil
	}
	if err != nil {
		return File{}, fmt.Errorf("approvers: read %s: %w", path, err)
	}
	if _, err := Parse(b); err != nil {
		return File{}, fmt.Errorf("%s: %w", path, err)
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return File{}, fmt.Errorf("approvers: %s: %w", path, err)
	}
	return f, nil
}

// WriteFile validates f and replaces the approvers file at path atomically (mode 0600: the
// hashes are not for everyone).
func WriteFile(path string, f File) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("approvers: %w", err)
	}
	if _, err := Parse(b); err != nil {
		return err
	}
	if err := privfile.Replace(path, ".approvers-*.json", append(b, '\n')); err != nil {
		return fmt.Errorf("approvers: %w", err)
	}
	return nil
}

// HashPassword returns the bcrypt hash (default cost) of a password; passwords shorter than
// MinPasswordLen are refused.
func HashPassword(password string) (string, error) {
	if len(password) < MinPasswordLen {
		return "", fmt.Errorf("approvers: a password needs at least %d characters", MinPasswordLen)
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return "", fmt.Errorf("approvers: hash password: %w", err)
	}
	return string(h), nil
}

// MinPasswordLen is the shortest approver page password accepted.
const MinPasswordLen = 12

// Add puts approver a into the file at path (creating it), failing with ErrExists when the
// name is taken, in any case ("Bob" beside "bob": one name must not mean two people).
func Add(path string, a Approver) error {
	f, err := withAdded(path, a)
	if err != nil {
		return err
	}
	return WriteFile(path, f)
}

// CheckAdd reports, writing nothing, whether Add(path, a) would succeed: ErrExists when the
// name is taken in any case, a validation error when the file with a would not parse. A
// command that writes other files for a (its credential) calls it first, so a refused
// change leaves nothing behind (issue 33, item 5).
func CheckAdd(path string, a Approver) error {
	f, err := withAdded(path, a)
	if err != nil {
		return err
	}
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("approvers: %w", err)
	}
	_, err = Parse(b)
	return err
}

// withAdded is the approvers file at path with a appended.
func withAdded(path string, a Approver) (File, error) {
	f, err := ReadFile(path)
	if err != nil {
		return File{}, err
	}
	for _, x := range f.Approvers {
		if strings.EqualFold(x.Name, a.Name) {
			return File{}, fmt.Errorf("%w: approver %q (as %q)", ErrExists, a.Name, x.Name)
		}
	}
	f.Approvers = append(f.Approvers, a)
	return f, nil
}

// Update replaces the approver named a.Name in the file at path. Errors: ErrBadCredentials
// when there is no such approver.
func Update(path string, a Approver) error {
	f, err := ReadFile(path)
	if err != nil {
		return err
	}
	for i, x := range f.Approvers {
		if x.Name == a.Name {
			f.Approvers[i] = a
			return WriteFile(path, f)
		}
	}
	return fmt.Errorf("%w: no approver %q", ErrBadCredentials, a.Name)
}

// Remove deletes the approver named name from the file at path: workers (which re-read the
// file) refuse their decisions from then on, and the approver page ends their sessions.
// Errors: ErrBadCredentials when there is no such approver.
func Remove(path, name string) error {
	f, err := ReadFile(path)
	if err != nil {
		return err
	}
	for i, x := range f.Approvers {
		if x.Name == name {
			f.Approvers = slices.Delete(f.Approvers, i, i+1)
			return WriteFile(path, f)
		}
	}
	return fmt.Errorf("%w: no approver %q", ErrBadCredentials, name)
}

// Find returns the approver named name from the file at path.
func Find(path, name string) (Approver, bool, error) {
	f, err := ReadFile(path)
	if err != nil {
		return Approver{}, false, err
	}
	for _, x := range f.Approvers {
		if x.Name == name {
			return x, true, nil
		}
	}
	return Approver{}, false, nil
}

// AddSurface puts surface s into the file at path, replacing the key of a surface of the same
// name (a surface rotates its key by re-registering).
func AddSurface(path string, s Surface) error {
	f, err := ReadFile(path)
	if err != nil {
		return err
	}
	for i, x := range f.Surfaces {
		if x.Name == s.Name {
			f.Surfaces[i] = s
			return WriteFile(path, f)
		}
	}
	f.Surfaces = append(f.Surfaces, s)
	return WriteFile(path, f)
}

// Ephemeral builds an in-memory approvers Set with one fresh credential per name, for an
// in-process approver (the evaluation's scripted approver, tests): nothing is written to disk.
func Ephemeral(names ...string) (*Set, map[string]Credential, error) {
	var f File
	creds := make(map[string]Credential, len(names))
	for _, n := range names {
		c, err := NewCredential("approver:" + n)
		if err != nil {
			return nil, nil, err
		}
		creds[n] = c
		f.Approvers = append(f.Approvers, Approver{Name: n, PublicKey: c.Public()})
	}
	b, err := json.Marshal(f)
	if err != nil {
		return nil, nil, fmt.Errorf("approvers: %w", err)
	}
	set, err := Parse(b)
	if err != nil {
		return nil, nil, err
	}
	return set, creds, nil
}
