package evidence_test

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/evidence"
	"github.com/scribe-es/scribe/journal"
)

// mth is RFC 9162's recursive definition of the tree head, over leaf hashes.
func mth(leaves []journal.Hash) journal.Hash {
	switch len(leaves) {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return leaves[0]
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	l, r := mth(leaves[:k]), mth(leaves[k:])
	return sha256.Sum256(append(append([]byte{1}, l[:]...), r[:]...))
}

func leaves(n int) []journal.Hash {
	out := make([]journal.Hash, n)
	for i := range out {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(i))
		out[i] = sha256.Sum256(b[:])
	}
	return out
}

// TestMerkleRootIsRFC9162 checks the bottom-up root against the recursive
// definition for every size up to 300.
func TestMerkleRootIsRFC9162(t *testing.T) {
	t.Parallel()
	for n := 0; n <= 300; n++ {
		ls := leaves(n)
		require.Equal(t, mth(ls), evidence.MerkleRoot(ls), "size %d", n)
	}
}

// TestMerklePaths: every leaf of every tree up to 130 leaves has a path of
// at most ceil(log2 n) hashes leading to the root; a path used at another
// index, with another size, shortened, lengthened or with a flipped bit
// does not.
func TestMerklePaths(t *testing.T) {
	t.Parallel()
	for n := 1; n <= 130; n++ {
		ls := leaves(n)
		root := evidence.MerkleRoot(ls)
		depth := 0
		for 1<<depth < n {
			depth++
		}
		for i := range n {
			path, err := evidence.MerklePath(ls, i)
			require.NoError(t, err)
			require.LessOrEqual(t, len(path), depth)
			got, err := evidence.RootFromPath(ls[i], uint64(i), uint64(n), path)
			require.NoError(t, err)
			require.Equal(t, root, got, "n=%d i=%d", n, i)

			if n > 1 {
				other := (i + 1) % n
				if got, err := evidence.RootFromPath(ls[i], uint64(other), uint64(n), path); err == nil {
					require.NotEqual(t, root, got, "n=%d: leaf %d's path at index %d", n, i, other)
				}
				if got, err := evidence.RootFromPath(ls[other], uint64(i), uint64(n), path); err == nil {
					require.NotEqual(t, root, got, "n=%d: another leaf on %d's path", n, i)
				}
				if len(path) > 0 {
					bad := append([]journal.Hash(nil), path...)
					bad[len(bad)/2][3] ^= 1
					got, err := evidence.RootFromPath(ls[i], uint64(i), uint64(n), bad)
					require.NoError(t, err)
					require.NotEqual(t, root, got)
					_, err = evidence.RootFromPath(ls[i], uint64(i), uint64(n), path[:len(path)-1])
					require.Error(t, err, "a short path")
				}
				_, err = evidence.RootFromPath(ls[i], uint64(i), uint64(n), append(path, root))
				require.Error(t, err, "a long path")
			}
		}
		_, err := evidence.MerklePath(ls, n)
		require.Error(t, err)
		_, err = evidence.RootFromPath(root, uint64(n), uint64(n), nil)
		require.Error(t, err)
	}
}

// FuzzMerklePath: for any size and index, the path leads to the root, and
// the root agrees with the recursive definition.
func FuzzMerklePath(f *testing.F) {
	f.Add(uint16(1), uint16(0))
	f.Add(uint16(7), uint16(6))
	f.Add(uint16(1000), uint16(513))
	f.Fuzz(func(t *testing.T, n, i uint16) {
		if n == 0 {
			return
		}
		idx := int(i) % int(n)
		ls := leaves(int(n))
		root := evidence.MerkleRoot(ls)
		require.Equal(t, mth(ls), root)
		path, err := evidence.MerklePath(ls, idx)
		require.NoError(t, err)
		got, err := evidence.RootFromPath(ls[idx], uint64(idx), uint64(n), path)
		require.NoError(t, err)
		require.Equal(t, root, got)
	})
}
