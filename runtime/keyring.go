package runtime

import (
	"context"
	"fmt"
	"sync"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/journal"
)

// keyring is a Runtime's view of its key store: a bounded in-process cache
// of data keys, erasures and stream bindings in front of the KeyStore.
// Safe for concurrent use. Keys leave the cache when their subject's
// erasure reaches this runtime on the key store's erasure feed (forget),
// when a poll of that feed fails (clearKeys), or to make room.
type keyring struct {
	store erasure.KeyStore
	max   int

	mu     sync.RWMutex // read-locked on the hot paths (cache hits)
	keys   map[string]erasure.DataKey
	erased map[string]erasure.Erasure // begun erasures are permanent: safe to cache
	bound  map[bindKey]struct{}
	// gen counts forget and clearKeys calls: a key read from the store is
	// cached only if gen did not move during the read, so a key read just
	// before its erasure began never outlives the forget that followed.
	gen uint64
	// dropped holds the erased subjects whose streams' actors this runtime
	// has evicted since (dropErased): every state it holds of them now was
	// rebuilt after the erasure, without their personal data.
	dropped map[string]struct{}
	// startSeq is the key store's erasure head (KeyStore.ErasureHead) when
	// this runtime began to follow the erasure feed: an erasure with a
	// Sequence at or below it was begun (its key refused) before this
	// runtime could read the subject's data.
	startSeq uint64
}

type bindKey struct {
	subject string
	stream  journal.StreamID
}

func newKeyring(store erasure.KeyStore, max int) *keyring {
	if store == nil {
		return nil
	}
	return &keyring{store: store, max: max, keys: map[string]erasure.DataKey{}, erased: map[string]erasure.Erasure{},
		bound: map[bindKey]struct{}{}, dropped: map[string]struct{}{}}
}

// makeRoom drops arbitrary entries of m until it has room for one more.
func makeRoom[K comparable, V any](m map[K]V, max int) {
	for k := range m {
		if len(m) < max {
			return
		}
		delete(m, k)
	}
}

// dataKey returns subject's key for sealing (creating it in the store on
// first use), or a *erasure.SubjectErasedError.
func (k *keyring) dataKey(ctx context.Context, subject string) (erasure.DataKey, error) {
	k.mu.RLock()
	if key, ok := k.keys[subject]; ok {
		k.mu.RUnlock()
		return key, nil
	}
	if e, ok := k.erased[subject]; ok {
		k.mu.RUnlock()
		return erasure.DataKey{}, &erasure.SubjectErasedError{Erasure: e}
	}
	gen := k.gen
	k.mu.RUnlock()
	key, err := k.store.DataKey(ctx, subject)
	if err != nil {
		return erasure.DataKey{}, err
	}
	k.mu.Lock()
	if k.gen == gen {
		makeRoom(k.keys, k.max)
		k.keys[subject] = key
	}
	k.mu.Unlock()
	return key, nil
}

// bind records, once per process and pair, that stream holds subject's
// personal data.
func (k *keyring) bind(ctx context.Context, subject string, stream journal.StreamID) error {
	bk := bindKey{subject, stream.Normalize()}
	k.mu.RLock()
	_, done := k.bound[bk]
	k.mu.RUnlock()
	if done {
		return nil
	}
	if err := k.store.BindStream(ctx, subject, bk.stream); err != nil {
		return fmt.Errorf("runtime: recording that stream %s holds personal data of subject %q: %w", bk.stream, subject, err)
	}
	k.mu.Lock()
	makeRoom(k.bound, k.max)
	k.bound[bk] = struct{}{}
	k.mu.Unlock()
	return nil
}

// lookup returns the keys and erasures of subjects, from the cache when it
// has them.
func (k *keyring) lookup(ctx context.Context, subjects []string) (erasure.Lookup, error) {
	out := erasure.Lookup{Keys: make(map[string]erasure.DataKey, len(subjects))}
	var missing []string
	k.mu.RLock()
	for _, s := range subjects {
		if key, ok := k.keys[s]; ok {
			out.Keys[s] = key
		} else if e, ok := k.erased[s]; ok {
			if out.Erased == nil {
				out.Erased = map[string]erasure.Erasure{}
			}
			out.Erased[s] = e
		} else {
			missing = append(missing, s)
		}
	}
	gen := k.gen
	k.mu.RUnlock()
	if len(missing) == 0 {
		return out, nil
	}
	got, err := k.store.Lookup(ctx, missing)
	if err != nil {
		return erasure.Lookup{}, fmt.Errorf("runtime: looking up data keys: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for s, key := range got.Keys {
		out.Keys[s] = key
		if k.gen == gen {
			makeRoom(k.keys, k.max)
			k.keys[s] = key
		}
	}
	for s, e := range got.Erased {
		if out.Erased == nil {
			out.Erased = map[string]erasure.Erasure{}
		}
		out.Erased[s] = e
		makeRoom(k.erased, k.max)
		k.erased[s] = e
	}
	return out, nil
}

// forget drops subject's cached key and bindings after its erasure, and
// remembers the erasure.
func (k *keyring) forget(e erasure.Erasure) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gen++
	delete(k.keys, e.Subject)
	for bk := range k.bound {
		if bk.subject == e.Subject {
			delete(k.bound, bk)
		}
	}
	makeRoom(k.erased, k.max)
	k.erased[e.Subject] = e
}

// markDropped records that this runtime evicted the actors of subject's
// streams after its erasure.
func (k *keyring) markDropped(subject string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	makeRoom(k.dropped, k.max)
	k.dropped[subject] = struct{}{}
}

// clearKeys empties the key cache: after a failed poll of the erasure feed
// this runtime cannot tell which cached keys were destroyed since.
func (k *keyring) clearKeys() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gen++
	clear(k.keys)
}

// wasDropped reports whether this runtime holds no state of e's subject
// from before its erasure: markDropped was called for it, or the erasure
// was begun before this runtime started following the erasure feed (its
// key was refused before the runtime could read the data). The zero
// Erasure (not erased) reports false.
func (k *keyring) wasDropped(e erasure.Erasure) bool {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if _, ok := k.dropped[e.Subject]; ok {
		return true
	}
	return e.State.Begun() && e.Sequence <= k.startSeq
}

// open opens the sealed fields of a stored record's data.
func (k *keyring) open(ctx context.Context, rec *journal.Record) (erasure.Opened, error) {
	subjects, err := erasure.Subjects(rec.Data)
	if err != nil {
		return erasure.Opened{}, fmt.Errorf("runtime: stored event %q (id %s): %w", rec.Type, rec.ID, err)
	}
	keys, err := k.lookup(ctx, subjects)
	if err != nil {
		return erasure.Opened{}, err
	}
	op, err := erasure.Open(rec.Data, rec.Type, keys)
	if err != nil {
		return erasure.Opened{}, fmt.Errorf("runtime: stored event %q (id %s): %w", rec.Type, rec.ID, err)
	}
	return op, nil
}
