package auditsink

import (
	"bufio"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// readFrames reads RFC 6587 octet-counted messages from c until it closes.
func readFrames(c net.Conn, out chan<- string) {
	r := bufio.NewReader(c)
	for {
		n, err := r.ReadString(' ')
		if err != nil {
			return
		}
		size, err := strconv.Atoi(strings.TrimSpace(n))
		if err != nil {
			return
		}
		b := make([]byte, size)
		if _, err := io.ReadFull(r, b); err != nil {
			return
		}
		out <- string(b)
	}
}

// Messages are RFC 5424 in octet-counted frames; a receiver that closed the connection
// between two batches is noticed before the next one is written, which goes on a new
// connection whole.
func TestSyslogFramesAndNoticesAClosedConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 16)
	conns := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
			go readFrames(c, got)
		}
	}()
	s := &Syslog{Addr: ln.Addr().String(), Hostname: "api 1"}
	defer s.Close()
	line := func(i int, outcome string) []byte {
		return []byte(`{"leafIndex":` + strconv.Itoa(i) + `,"leafHash":"x","event":{"id":1,"at":"2026-12-03T22:00:00.123456Z","outcome":"` + outcome + `"}}`)
	}
	if err := s.Deliver(context.Background(), [][]byte{line(0, "SUCCEEDED"), line(1, "REFUSED")}); err != nil {
		t.Fatal(err)
	}
	first := <-conns
	for i, want := range []string{"<110>1 2026-12-03T22:00:00.123456Z api1 apelora ", "<108>1 2026-12-03T22:00:00.123456Z api1 apelora "} {
		m := <-got
		if !strings.HasPrefix(m, want) || !strings.HasSuffix(m, " audit - "+string(line(i, map[int]string{0: "SUCCEEDED", 1: "REFUSED"}[i]))) {
			t.Fatalf("message %d: %q", i, m)
		}
	}
	first.Close() // the receiver goes away between batches
	time.Sleep(50 * time.Millisecond)
	if err := s.Deliver(context.Background(), [][]byte{line(2, "SUCCEEDED")}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-conns:
	case <-time.After(5 * time.Second):
		t.Fatal("the batch after the receiver closed did not go on a new connection")
	}
	if m := <-got; !strings.Contains(m, `"leafIndex":2`) {
		t.Fatalf("after reconnecting: %q", m)
	}
	ln.Close()
	s.Close()
	if err := s.Deliver(context.Background(), [][]byte{line(3, "SUCCEEDED")}); err == nil {
		t.Fatal("a receiver that is gone acknowledged a batch")
	}
}
