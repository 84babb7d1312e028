package receipts

import (
	"crypto"
	_ "crypto/sha256" // registers crypto.SHA256 for the RFC 6962 hasher
	"errors"
	"fmt"
	"slices"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
)

// HashSize is the size of every hash in the log (SHA-256, RFC 6962 section 2.1).
const HashSize = 32

// hasher is the RFC 6962 hasher: leaf hash SHA-256(0x00 || leaf), node hash
// SHA-256(0x01 || left || right).
var hasher = rfc6962.New(crypto.SHA256)

var rangeFactory = &compact.RangeFactory{Hash: hasher.HashChildren}

// ErrCorruptHead reports a stored head whose frontier does not fit its size.
var ErrCorruptHead = errors.New("receipts: corrupt log head")

// LeafHash is the RFC 6962 (section 2.1) leaf hash of leaf bytes: SHA-256(0x00 || leaf).
func LeafHash(leaf []byte) []byte { return hasher.HashLeaf(leaf) }

// EmptyRoot is the root of the empty tree: SHA-256 of the empty string (RFC 6962 section 2.1).
func EmptyRoot() []byte { return hasher.EmptyRoot() }

// Head is the state of the log needed to append: its size and its compact range [0, Size)
// (the roots of the perfect subtrees the tree decomposes into, largest first; at most 64).
type Head struct {
	Size     uint64
	Frontier [][]byte
}

// Appended is what Head.Append returns about the new leaf.
type Appended struct {
	// Index is the leaf's index (the old size).
	Index uint64
	// Root is the root of the tree of size Index+1.
	Root []byte
	// Proof is the RFC 6962 (section 2.1.1) inclusion proof of the leaf in the tree of size
	// Index+1, bottom up: the old frontier reversed.
	Proof [][]byte
}

// Append adds the leaf whose hash is leafHash and returns the new head and the leaf's proof.
// h is not modified. An error wraps ErrCorruptHead.
func (h Head) Append(leafHash []byte) (Head, Appended, error) {
	r, err := rangeFactory.NewRange(0, h.Size, clone(h.Frontier))
	if err != nil {
		return Head{}, Appended{}, fmt.Errorf("%w: size %d: %w", ErrCorruptHead, h.Size, err)
	}
	proof := clone(h.Frontier)
	slices.Reverse(proof)
	if err := r.Append(leafHash, nil); err != nil {
		return Head{}, Appended{}, fmt.Errorf("%w: append: %w", ErrCorruptHead, err)
	}
	root, err := r.GetRootHash(nil)
	if err != nil {
		return Head{}, Appended{}, fmt.Errorf("%w: root: %w", ErrCorruptHead, err)
	}
	return Head{Size: r.End(), Frontier: r.Hashes()}, Appended{Index: h.Size, Root: root, Proof: proof}, nil
}

// Root is the tree's root hash (EmptyRoot for size 0).
func (h Head) Root() ([]byte, error) {
	if h.Size == 0 {
		return EmptyRoot(), nil
	}
	r, err := rangeFactory.NewRange(0, h.Size, clone(h.Frontier))
	if err != nil {
		return nil, fmt.Errorf("%w: size %d: %w", ErrCorruptHead, h.Size, err)
	}
	return r.GetRootHash(nil)
}

// JoinHashes concatenates hashes (the stored form of a frontier or a proof).
func JoinHashes(hs [][]byte) []byte {
	out := make([]byte, 0, len(hs)*HashSize)
	for _, h := range hs {
		out = append(out, h...)
	}
	return out
}

// SplitHashes is JoinHashes' inverse; b's length must be a multiple of HashSize.
func SplitHashes(b []byte) ([][]byte, error) {
	if len(b)%HashSize != 0 {
		return nil, fmt.Errorf("receipts: %d bytes are not a list of %d-byte hashes", len(b), HashSize)
	}
	out := make([][]byte, 0, len(b)/HashSize)
	for i := 0; i < len(b); i += HashSize {
		out = append(out, slices.Clone(b[i:i+HashSize]))
	}
	return out, nil
}

func clone(hs [][]byte) [][]byte {
	out := make([][]byte, len(hs))
	for i, h := range hs {
		out[i] = slices.Clone(h)
	}
	return out
}
