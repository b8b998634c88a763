// Package clusterpb holds the protobuf messages Scribe's cluster mode sends
// between nodes: command envelopes and their replies, and DCB reservation
// requests. The messages are generated from scribe_cluster.proto; regenerate with
// go generate after editing it.
//
// Generated with protoc 3.21.12 (libprotoc) and protoc-gen-go v1.36.12
// (go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12).
//
//go:generate protoc --go_out=. --go_opt=paths=source_relative scribe_cluster.proto
package clusterpb
