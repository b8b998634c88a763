// Package freeport hands tests TCP ports that another process (or a
// cluster endpoint started later) will listen on.
//
// A port taken from net.Listen("127.0.0.1:0") and closed again lies in the
// kernel's ephemeral range, the same range every outgoing connection's local
// port is drawn from: between the pick and the child's bind, a gRPC or
// Postgres client anywhere on the machine may take it, and the child fails
// with "address already in use" (it did, in CI). Ports from this package
// lie below that range, so no outgoing connection is ever given one; each is
// checked free by binding it, and one process never hands the same port out
// twice.
package freeport
