//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package postgres

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed reports whether the peer of an idle connection has already
// closed it (an orderly close with nothing left to read) or reset it, by one
// non-blocking peek at the socket: no bytes are consumed or sent. Pending
// bytes (a server's notice or its error before it closes, TLS records) count
// as open: the client reads them on its next call and reports what they say.
// A connection that is not a plain socket is reported open.
func peerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == nil:
			closed = n == 0
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, syscall.EINTR):
		default:
			closed = true // reset, or the socket is otherwise broken
		}
		return true // never wait for data
	})
	return closed || err != nil
}
