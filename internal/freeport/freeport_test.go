package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestPortsAreDistinctFreeAndBelowTheEphemeralRange(t *testing.T) {
	ps := Ports(t, 50)
	seen := map[int]bool{}
	for _, p := range ps {
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if p < lowest || p >= ephemeralLow() {
			t.Fatalf("port %d outside [%d, %d)", p, lowest, ephemeralLow())
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		_ = l.Close()
	}
	// A later call never repeats a port handed out before.
	for _, p := range Ports(t, 50) {
		if seen[p] {
			t.Fatalf("port %d handed out again", p)
		}
	}
}

// A port held by a listener is never handed out.
func TestPortsSkipsABoundPort(t *testing.T) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	bound := map[int]bool{}
	for p := lowest; p < lowest+200; p++ {
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
			held = append(held, l)
			bound[p] = true
		}
	}
	for range 20 {
		for _, p := range Ports(t, 10) {
			if bound[p] {
				t.Fatalf("port %d is held by this test and was handed out", p)
			}
		}
	}
}
