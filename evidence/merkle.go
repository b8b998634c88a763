package evidence

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
)

// Domain prefixes of the hashes of the two-level Merkle tree (see the
// package documentation). Each hashed input starts with one, so an event
// leaf, a stream leaf and an interior node never hash alike.
const (
	prefixEventLeaf  = 0x00
	prefixNode       = 0x01
	prefixStreamLeaf = 0x02
)

// EventLeaf returns the leaf hash of one event in its stream's tree:
// SHA-256(0x00 || id (16 bytes) || chain hash (32 bytes)). The chain hash
// is the event's journal.StreamLink.Hash in that stream, so the leaf
// commits to the event's content and, through the chain, to every earlier
// event of the stream.
func EventLeaf(id uuid.UUID, hash journal.Hash) journal.Hash {
	var b [1 + 16 + 32]byte
	b[0] = prefixEventLeaf
	copy(b[1:17], id[:])
	copy(b[17:], hash[:])
	return sha256.Sum256(b[:])
}

// StreamLeaf returns the leaf hash of one stream in the checkpoint's tree:
// SHA-256(0x02 || str(partition) || str(tag) || uint64 version || head (32)
// || root (32)), str being a uint64 big-endian length then the bytes, as
// in journal.CanonicalBytes.
func StreamLeaf(s StreamHead) journal.Hash {
	b := make([]byte, 0, 1+8+len(s.Partition)+8+len(s.Tag)+8+64)
	b = append(b, prefixStreamLeaf)
	b = appendStr(b, s.Partition)
	b = appendStr(b, string(s.Tag))
	b = binary.BigEndian.AppendUint64(b, s.Version)
	b = append(b, s.Head[:]...)
	b = append(b, s.Root[:]...)
	return sha256.Sum256(b)
}

// node returns SHA-256(0x01 || left || right).
func node(left, right journal.Hash) journal.Hash {
	var b [1 + 64]byte
	b[0] = prefixNode
	copy(b[1:33], left[:])
	copy(b[33:], right[:])
	return sha256.Sum256(b[:])
}

// emptyRoot is the root of a tree without leaves: SHA-256 of nothing.
var emptyRoot = journal.Hash(sha256.Sum256(nil))

// split returns the largest power of two smaller than n (n ≥ 2): the size
// of the left subtree of a tree of n leaves (RFC 9162, section 2.1.1).
func split(n int) int {
	return 1 << (bits.Len(uint(n-1)) - 1)
}

// MerkleRoot returns the root of the Merkle tree over leaves (leaf hashes,
// in order), shaped as RFC 9162 section 2.1.1 shapes it: the left subtree
// holds the largest power of two of leaves smaller than their count. No
// leaves give SHA-256 of nothing; one leaf is its own root. leaves is not
// modified.
func MerkleRoot(leaves []journal.Hash) journal.Hash {
	switch len(leaves) {
	case 0:
		return emptyRoot
	case 1:
		return leaves[0]
	}
	// Bottom-up over a copy, level by level; a level of odd length carries
	// its last hash up unchanged, which yields the same shape as the
	// recursive definition.
	level := append([]journal.Hash(nil), leaves...)
	for len(level) > 1 {
		n := 0
		for i := 0; i+1 < len(level); i += 2 {
			level[n] = node(level[i], level[i+1])
			n++
		}
		if len(level)%2 == 1 {
			level[n] = level[len(level)-1]
			n++
		}
		level = level[:n]
	}
	return level[0]
}

// MerklePath returns the audit path of leaf index in the tree over leaves
// (RFC 9162 section 2.1.3.1): the hashes of the siblings on the way from the
// leaf to the root, nearest first, at most ceil(log2(len(leaves))) of them.
func MerklePath(leaves []journal.Hash, index int) ([]journal.Hash, error) {
	if index < 0 || index >= len(leaves) {
		return nil, fmt.Errorf("evidence: leaf %d is outside a tree of %d leaves", index, len(leaves))
	}
	var path []journal.Hash
	for len(leaves) > 1 {
		k := split(len(leaves))
		if index < k {
			path = append(path, MerkleRoot(leaves[k:]))
			leaves = leaves[:k]
		} else {
			path = append(path, MerkleRoot(leaves[:k]))
			leaves = leaves[k:]
			index -= k
		}
	}
	// Collected root-first; the verifier walks leaf-first.
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return path, nil
}

// RootFromPath returns the root that leaf, at index in a tree of size
// leaves, and its audit path imply (RFC 9162 section 2.1.3.2). It fails
// when index is outside the tree or the path's length does not fit the
// tree's shape; the caller compares the root it returns with the one it
// trusts.
func RootFromPath(leaf journal.Hash, index, size uint64, path []journal.Hash) (journal.Hash, error) {
	if index >= size {
		return journal.Hash{}, fmt.Errorf("evidence: leaf %d is outside a tree of %d leaves", index, size)
	}
	fn, sn := index, size-1
	r := leaf
	for _, p := range path {
		if sn == 0 {
			return journal.Hash{}, fmt.Errorf("evidence: the audit path has %d hashes, more than a tree of %d leaves needs", len(path), size)
		}
		if fn&1 == 1 || fn == sn {
			r = node(p, r)
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			r = node(r, p)
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 {
		return journal.Hash{}, fmt.Errorf("evidence: the audit path has %d hashes, fewer than a tree of %d leaves needs", len(path), size)
	}
	return r, nil
}

func appendStr(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}
