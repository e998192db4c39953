package server

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apelora/fabric/apperr"
)

// fakeConn records the close the transport asks for.
type fakeConn struct {
	code   int
	reason string
}

func (c *fakeConn) Close() error                        { return nil }
func (c *fakeConn) NextReader() (int, io.Reader, error) { return 0, nil, io.EOF }
func (c *fakeConn) WriteJSON(any) error                 { return nil }
func (c *fakeConn) Subprotocol() string                 { return "graphql-transport-ws" }
func (c *fakeConn) WriteClose(code int, reason string) error {
	c.code, c.reason = code, reason
	return nil
}

func TestASocketWhoseIdentityEndedClosesWith4403(t *testing.T) {
	long := `identity "` + strings.Repeat("é", 60) + `" was revoked: its token no longer works; ask an administrator for a new identity`
	cases := []struct {
		cause     error // nil: the context is still live
		code      int
		reasonHas string
	}{
		{nil, 1000, "terminated"},
		{context.Canceled, 1000, "terminated"},                                // shutdown, client gone
		{apperr.New(apperr.Unavailable, "database down"), 1000, "terminated"}, // not an identity's end
		{errors.New("plain"), 1000, "terminated"},                             // not ours
		{apperr.New(apperr.Unauthenticated, `identity "ci" was revoked`), 4403, `identity "ci" was revoked`},
		{apperr.New(apperr.Unauthenticated, "%s", long), 4403, `identity "éé`},
	}
	for _, c := range cases {
		end := &socketEnd{}
		ctx, cancel := context.WithCancelCause(context.WithValue(context.Background(), socketEndKey{}, end))
		setSocketContext(ctx)
		if c.cause != nil {
			cancel(c.cause)
		}
		fc := &fakeConn{}
		conn := &endingConn{WebsocketConn: fc, end: end}
		conn.WriteClose(1000, "terminated")
		if fc.code != c.code || !strings.Contains(fc.reason, c.reasonHas) {
			t.Errorf("cause %v: closed %d %q, want %d with %q", c.cause, fc.code, fc.reason, c.code, c.reasonHas)
		}
		if len(fc.reason) > 123 || !utf8.ValidString(fc.reason) {
			t.Errorf("cause %v: reason of %d bytes (valid UTF-8: %v) does not fit a close frame", c.cause, len(fc.reason), utf8.ValidString(fc.reason))
		}
		cancel(nil)
	}
}
