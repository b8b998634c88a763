// Package erasure makes personal data in events erasable while every hash
// chain of the journal stays verifiable (crypto-shredding).
//
// Personal fields of an event are sealed before the event reaches the
// journal: each field's JSON value is encrypted with AES-256-GCM under a data
// key of its subject (one key per subject, kept by a KeyStore, never in the
// journal) and replaced by an envelope object:
//
//	{"$personal":{"v":1,"subject":"c-42","ct":"<base64 of nonce|ciphertext|tag>"}}
//
// The journal's hash chain covers the envelope, that is the ciphertext.
// Erasing a subject destroys its key (KeyStore.Erase, O(1) work in the key
// store): from then on the envelopes of that subject can never be opened
// again, while the stored bytes, and so every chain, stay as they were.
// Open returns the event with the erased fields removed (they decode to the
// zero value) and the list of the erased field names; it never returns
// garbage and never fails because a subject was erased.
//
// The nonce is random (96 bits) per sealed field; the additional
// authenticated data binds the envelope version, the subject, the event type
// and the field name, so an envelope moved to another field, event type or
// subject fails to open instead of decrypting into the wrong place.
//
// Package runtime uses this package when an event type is registered with
// personal fields (runtime.WithPersonalData); package postgres provides a
// Postgres KeyStore (postgres.NewKeyStore) and NewMemoryKeyStore is the
// in-process one. Package erasuretest is the conformance suite every
// KeyStore passes.
//
// What a crypto-shred does not erase: personal data copied into places that
// are not sealed fields — tags, event type names, subject IDs themselves,
// metadata, or read models a user builds and does not delete on the
// erasure event. And a backup of the key store taken before an erasure still
// holds the key: keep key-store backups short-lived, or keep the data keys
// envelope-encrypted under a master key in a KMS (a KeyStore implementation
// can do that behind this interface) so that destroying the KMS-held key
// versions ends what old backups can decrypt. After restoring a key store,
// ReapplyRecorded erases again the subjects whose erasure records the
// journal holds.
package erasure
