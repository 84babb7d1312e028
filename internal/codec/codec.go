// Package codec encrypts what Airlock puts in Temporal's history: a payload codec (AES-256-GCM,
// the key id in each payload's metadata) that every client and worker applies through its data
// converter, so turn requests, user messages, model output, arguments, results and memos are
// ciphertext in the history and in Temporal's database. Rotation: payloads are encrypted with
// the current key and decrypted with whichever key their metadata names, so old keys stay in
// the key ring until no open history needs them. Search attributes are not payloads and stay
// readable (they carry no message text).
//
// The key ring is a file (AIRLOCK_PAYLOAD_KEYS_FILE): one key a line, "id hex64", the first line
// the current key. `airlock codec-server` serves the same codec over HTTP for the Temporal UI.
package codec

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// Metadata keys and the encoding of an encrypted payload.
const (
	// Encoding marks an encrypted payload (metadata "encoding").
	Encoding = "binary/encrypted"
	// MetadataKeyID names the key a payload was encrypted with.
	MetadataKeyID = "encryption-key-id"
	// metadataEncoding is the SDK's metadata key for the encoding.
	metadataEncoding = converter.MetadataEncoding
)

// Errors of the codec.
var (
	// ErrUnknownKey: a payload names a key id the ring does not hold (rotated out too early, or
	// another deployment's payload).
	ErrUnknownKey = errors.New("codec: unknown payload key id")
	// ErrDecrypt: the ciphertext does not authenticate (tampered, or the wrong key).
	ErrDecrypt = errors.New("codec: payload does not decrypt")
	// ErrKeyRing: the key ring file is malformed.
	ErrKeyRing = errors.New("codec: bad key ring")
)

// Key is one AES-256 key and its id.
type Key struct {
	ID  string
	Raw [32]byte
}

// Codec is the AES-256-GCM payload codec. It implements converter.PayloadCodec.
type Codec struct {
	current string
	aeads   map[string]cipher.AEAD
}

// New returns a codec encrypting with keys[0] and decrypting with any of keys. Ids must be
// non-empty, unique and free of spaces.
func New(keys []Key) (*Codec, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no key", ErrKeyRing)
	}
	c := &Codec{current: keys[0].ID, aeads: map[string]cipher.AEAD{}}
	for _, k := range keys {
		if k.ID == "" || strings.ContainsAny(k.ID, " \t\n") {
			return nil, fmt.Errorf("%w: key id %q", ErrKeyRing, k.ID)
		}
		if _, dup := c.aeads[k.ID]; dup {
			return nil, fmt.Errorf("%w: key id %q twice", ErrKeyRing, k.ID)
		}
		block, err := aes.NewCipher(k.Raw[:])
		if err != nil {
			return nil, fmt.Errorf("codec: %w", err)
		}
		gcm, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("codec: %w", err)
		}
		c.aeads[k.ID] = gcm
	}
	return c, nil
}

// ParseKeyRing reads a key ring: one "id hex64" a line (blank lines and # comments ignored),
// the first key current. Errors never contain key material.
func ParseKeyRing(b []byte) ([]Key, error) {
	var keys []Key
	sc := bufio.NewScanner(bytes.NewReader(b))
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%w: line %d: want \"id hex64\"", ErrKeyRing, n)
		}
		raw, err := hex.DecodeString(f[1])
		if err != nil || len(raw) != 32 {
			return nil, fmt.Errorf("%w: line %d: key %s is not 64 hex characters", ErrKeyRing, n, f[0])
		}
		k := Key{ID: f[0]}
		copy(k.Raw[:], raw)
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no key", ErrKeyRing)
	}
	return keys, nil
}

// FromEnv returns the codec of AIRLOCK_PAYLOAD_KEYS_FILE, or nil (no encryption) when it is
// unset.
func FromEnv() (*Codec, error) {
	path := os.Getenv("AIRLOCK_PAYLOAD_KEYS_FILE")
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("codec: AIRLOCK_PAYLOAD_KEYS_FILE: %w", err)
	}
	keys, err := ParseKeyRing(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return New(keys)
}

// NewKey returns a fresh random key with id.
func NewKey(id string) (Key, error) {
	k := Key{ID: id}
	if _, err := rand.Read(k.Raw[:]); err != nil {
		return k, fmt.Errorf("codec: new key: %w", err)
	}
	return k, nil
}

// Line is the key ring line of k.
func (k Key) Line() string { return k.ID + " " + hex.EncodeToString(k.Raw[:]) }

// CurrentKeyID is the id new payloads are encrypted with.
func (c *Codec) CurrentKeyID() string { return c.current }

// Encode encrypts each payload (its whole protobuf encoding, metadata included) with the
// current key; the nonce prefixes the ciphertext.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	aead := c.aeads[c.current]
	for i, p := range payloads {
		plain, err := p.Marshal()
		if err != nil {
			return nil, fmt.Errorf("codec: marshal payload: %w", err)
		}
		nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
		if _, err := rand.Read(nonce); err != nil {
			return nil, fmt.Errorf("codec: nonce: %w", err)
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{metadataEncoding: []byte(Encoding), MetadataKeyID: []byte(c.current)},
			Data:     aead.Seal(nonce, nonce, plain, []byte(c.current)),
		}
	}
	return out, nil
}

// Decode decrypts each encrypted payload with the key its metadata names and passes others
// through unchanged (payloads written before encryption was turned on).
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[metadataEncoding]) != Encoding {
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[MetadataKeyID])
		aead, ok := c.aeads[id]
		if !ok {
			return nil, fmt.Errorf("%w %q", ErrUnknownKey, id)
		}
		if len(p.GetData()) < aead.NonceSize() {
			return nil, ErrDecrypt
		}
		ns := aead.NonceSize()
		plain, err := aead.Open(nil, p.GetData()[:ns], p.GetData()[ns:], []byte(id))
		if err != nil {
			return nil, ErrDecrypt
		}
		var dec commonpb.Payload
		if err := dec.Unmarshal(plain); err != nil {
			return nil, fmt.Errorf("codec: decrypted payload: %w", err)
		}
		out[i] = &dec
	}
	return out, nil
}

// DataConverter is the data converter of every Airlock client and worker: the SDK's default,
// with hidden characters in JSON payloads written as \u escapes (Escape), then encrypted with c
// (nil c: no encryption).
func DataConverter(c *Codec) converter.DataConverter {
	if c == nil {
		return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), Escape{})
	}
	// Encoding runs the codecs last to first: escape, then encrypt; decoding the reverse.
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c, Escape{})
}
