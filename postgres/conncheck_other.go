//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package postgres

import "net"

// peerClosed is not implemented on this platform: every connection counts as
// open, and an append sent on one the server already closed reports
// journal.ErrOutcomeUnknown as it must.
func peerClosed(net.Conn) bool { return false }
