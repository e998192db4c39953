package producttest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"testing"
)

// ListenAddr returns "127.0.0.1:port" with a port nothing listens on, for a child process
// (apelora serve, a worker's metrics, rsyslogd) to listen on; see ListenPorts.
func ListenAddr(t testing.TB) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(ListenPorts(t, 1)[0])
}

// ListenPorts returns n distinct ports on 127.0.0.1 that nothing listens on, for child
// processes to listen on. They are chosen at random below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range, from 32768 by default): a port the kernel handed out for
// 127.0.0.1:0 and that was closed again can be taken by any outgoing connection before the
// child listens on it ("address already in use", seen in CI under load, issue 26.6); a
// port below that range only by another listener choosing the same one.
func ListenPorts(t testing.TB, n int) []int {
	t.Helper()
	low := ephemeralLow()
	const from = 10000
	var ports []int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 || low <= from+n {
			t.Fatalf("no free port on 127.0.0.1 in %d–%d after %d tries", from, low-1, tries)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", from+rand.IntN(low-from)))
		if err != nil {
			continue
		}
		held = append(held, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil || lo < 1024 {
		return 32768
	}
	return lo
}
