// Package backend holds what journal backends share beyond the contract of
// package journal: the encoding of an event's metadata as its backend stores
// it (AppendMetadataJSON, DecodeMetadataJSON) and the linking of a new record
// into its hash chains (LinkRecord). Services, projections and other callers
// of a journal never need it; they use package journal alone.
//
// Every function here produces exactly what package journal's contract
// defines: LinkRecord the links journal.VerifyStream checks, the metadata
// functions the bytes of encoding/json.
package backend
