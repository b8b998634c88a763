package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// lowest is the first port handed out: above the well-known and most
// registered service ports a developer machine runs (Postgres 5432, NATS
// 4222, RabbitMQ 5672, Redis 6379, MariaDB 3306, etcd 2379).
const lowest = 10000

var (
	mu     sync.Mutex
	handed = map[int]bool{}
)

// Ports returns n distinct ports on 127.0.0.1 that were free when checked
// and lie below the kernel's ephemeral port range, so that no outgoing
// connection can take one before the caller binds it. It fails the test
// when none can be found.
func Ports(t testing.TB, n int) []int {
	t.Helper()
	ps, err := pick(n)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// Port returns one port as Ports does.
func Port(t testing.TB) int {
	t.Helper()
	return Ports(t, 1)[0]
}

func pick(n int) ([]int, error) {
	top := ephemeralLow() - 1
	if top <= lowest {
		return nil, fmt.Errorf("freeport: the ephemeral port range starts at %d, leaving no ports below it above %d", top+1, lowest)
	}
	mu.Lock()
	defer mu.Unlock()
	ps := make([]int, 0, n)
	for tries := 0; len(ps) < n; tries++ {
		if tries > 1000*n {
			return nil, fmt.Errorf("freeport: found only %d of %d free ports in [%d, %d]", len(ps), n, lowest, top)
		}
		p := lowest + rand.IntN(top-lowest+1)
		if handed[p] || !free(p) {
			continue
		}
		handed[p] = true
		ps = append(ps, p)
	}
	return ps, nil
}

// free reports whether p can be bound on 127.0.0.1 now.
func free(p int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux:
// /proc/sys/net/ipv4/ip_local_port_range; elsewhere the IANA range, 49152).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 49152
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 49152
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return 49152
	}
	return lo
}
