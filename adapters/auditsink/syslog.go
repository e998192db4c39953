package auditsink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/apelora/fabric/domain/auditexport"
)

// Syslog sends each event as an RFC 5424 message over TCP, framed by octet counting (RFC
// 6587 §3.4.1: the message's length, a space, the message), over TLS when TLS is set.
// The message's MSG is the event's JSON line (auditexport.Line), with no structured data.
//
// Plain syslog over TCP has no application acknowledgement, so a batch counts as
// acknowledged once it was written, every byte was acknowledged by the receiver's TCP (the
// socket's send queue drained) and the connection was still up afterwards. A connection
// found closed before a batch is dropped and the batch goes on a new one; a batch whose
// connection broke is sent again whole: at least once. What the receiver's kernel took but
// the receiver never wrote (it was killed with the data in its socket buffer) is lost to
// this sink; RELP would close that gap, rsyslog's usual stop does not open it.
type Syslog struct {
	Addr       string      // host:port
	TLS        *tls.Config // nil: plain TCP
	Hostname   string      // the HOSTNAME field; "" : os.Hostname
	Timeout    time.Duration
	conn       net.Conn
	tcp        *net.TCPConn
	procID     string
	hostHeader string
}

var _ auditexport.Sink = (*Syslog)(nil)

// SyslogTLS is the TLS configuration for a receiver whose certificate chains to the CA in
// caFile ("" : the system trust store), checked for serverName ("" : the address's host).
func SyslogTLS(addr, caFile, serverName string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if c.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("the syslog address %q is not host:port", addr)
		}
		c.ServerName = host
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("read the syslog receiver's CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the syslog receiver's CA file %s holds no PEM certificate", caFile)
		}
		c.RootCAs = pool
	}
	return c, nil
}

func (s *Syslog) Name() string {
	if s.TLS != nil {
		return "syslog tls://" + s.Addr
	}
	return "syslog tcp://" + s.Addr
}

func (s *Syslog) Kind() string { return "syslog" }

func (s *Syslog) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return 10 * time.Second
}

func (s *Syslog) dial(ctx context.Context) error {
	d := &net.Dialer{Timeout: s.timeout(), KeepAlive: 15 * time.Second}
	c, err := d.DialContext(ctx, "tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("connect to the syslog receiver %s: %w", s.Addr, err)
	}
	s.tcp = c.(*net.TCPConn)
	s.conn = c
	if s.TLS != nil {
		tc := tls.Client(c, s.TLS)
		hctx, cancel := context.WithTimeout(ctx, s.timeout())
		defer cancel()
		if err := tc.HandshakeContext(hctx); err != nil {
			c.Close()
			s.conn, s.tcp = nil, nil
			return fmt.Errorf("TLS with the syslog receiver %s: %w", s.Addr, err)
		}
		s.conn = tc
	}
	if s.hostHeader == "" {
		h := s.Hostname
		if h == "" {
			h, _ = os.Hostname()
		}
		s.hostHeader = headerField(h, 255)
		s.procID = strconv.Itoa(os.Getpid())
	}
	return nil
}

// headerField makes v a syslog header field: printable US-ASCII without spaces, at most
// n long, "-" when empty.
func headerField(v string, n int) string {
	b := make([]byte, 0, len(v))
	for i := 0; i < len(v) && len(b) < n; i++ {
		if c := v[i]; c > 32 && c < 127 {
			b = append(b, c)
		}
	}
	if len(b) == 0 {
		return "-"
	}
	return string(b)
}

// Facility 13 is "log audit" (RFC 5424 §6.2.1); severity informational for a change that
// succeeded, warning for one that failed or was refused.
const facilityLogAudit = 13

// frame writes one message with its octet count.
func (s *Syslog) frame(dst []byte, line []byte) ([]byte, error) {
	// The header needs the event's time and outcome.
	var l auditexport.Line
	if err := json.Unmarshal(line, &l); err != nil {
		return dst, fmt.Errorf("frame an exported audit event: %w", err)
	}
	at, sev, msgID := headerField(l.Event.At, 32), 6, "audit"
	switch {
	case !auditexport.IsEvent(line):
		// A checkpoint on its own: stamped now.
		at, msgID = time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00"), "checkpoint"
	case l.Event.Outcome != "SUCCEEDED":
		sev = 4
	}
	msg := fmt.Sprintf("<%d>1 %s %s apelora %s %s - ", facilityLogAudit*8+sev, at, s.hostHeader, s.procID, msgID)
	dst = strconv.AppendInt(dst, int64(len(msg)+len(line)), 10)
	dst = append(dst, ' ')
	dst = append(dst, msg...)
	return append(dst, line...), nil
}

func (s *Syslog) Deliver(ctx context.Context, lines [][]byte) error {
	if s.conn != nil {
		if err := s.alive(); err != nil {
			s.Close()
		}
	}
	if s.conn == nil {
		if err := s.dial(ctx); err != nil {
			return err
		}
	}
	var buf []byte
	for _, l := range lines {
		var err error
		if buf, err = s.frame(buf, l); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(s.timeout())
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = s.conn.SetWriteDeadline(deadline)
	if _, err := s.conn.Write(buf); err != nil {
		return fmt.Errorf("send to the syslog receiver %s: %w", s.Addr, err)
	}
	// Flushed: the receiver's TCP acknowledged every byte.
	for {
		n, err := unsent(s.tcp)
		if err != nil {
			return fmt.Errorf("ask the kernel what the syslog receiver %s has not acknowledged: %w", s.Addr, err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the syslog receiver %s did not acknowledge %d bytes within %s", s.Addr, n, s.timeout())
		}
		time.Sleep(2 * time.Millisecond)
	}
	// And the connection stayed up.
	if err := s.alive(); err != nil {
		return fmt.Errorf("the syslog receiver %s closed the connection: %w", s.Addr, err)
	}
	return nil
}

// errClosed: the receiver closed the connection (a syslog receiver never sends).
var errClosed = errors.New("closed by the receiver")

// alive says whether the connection is still up: nothing to read but not closed. Over TLS
// the receiver may send records (session tickets, an alert); they are read through TLS.
func (s *Syslog) alive() error {
	n, err := peek(s.tcp)
	if err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	_ = s.conn.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
	defer s.conn.SetReadDeadline(time.Time{})
	var b [512]byte
	for {
		_, err := s.conn.Read(b[:])
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil
		}
		if err != nil {
			return err
		}
		if s.TLS == nil {
			// Data on a plain syslog connection: not a syslog receiver; keep reading it off.
			continue
		}
	}
}

func (s *Syslog) Close() error {
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close()
	s.conn, s.tcp = nil, nil
	return err
}
