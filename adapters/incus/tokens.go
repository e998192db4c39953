package incus

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/plan"
)

// JoinToken is a freshly issued, single-use cluster join token.
//
// Its String, GoString, Format (every fmt verb), LogValue and MarshalJSON show only the
// member name, the operation id and the expiry: never the secret nor the encoded token.
// The encoded token, which a new host needs to join, is only returned by Reveal. Hand it
// to the administrator once and do not store, log or audit it.
type JoinToken struct {
	ServerName  string    // the member name the token is for
	OperationID string    // the token-class operation holding it (revoke by deleting it)
	Fingerprint string    // cluster certificate fingerprint the joiner will pin
	Addresses   []string  // members that were online when it was issued
	ExpiresAt   time.Time // after this the cluster refuses it

	// reveal returns the encoded token. It is a closure so that nothing reflective (fmt
	// printing a struct that holds a JoinToken in an unexported field, with any verb) can
	// reach the string: fmt prints a func as an address.
	reveal func() string
}

func sealToken(encoded string) func() string { return func() string { return encoded } }

// Reveal returns the encoded join token, exactly as `incus cluster add` prints it: standard
// base64 (padded) of compact JSON with the keys server_name, fingerprint, addresses, secret
// and expires_at in that order. It is the only way to read the token.
func (t JoinToken) Reveal() string {
	if t.reveal == nil {
		return ""
	}
	return t.reveal()
}

// Issued reports whether Incus issued the token (an operation holds it); a dry run's
// answer was issued by nobody.
func (t JoinToken) Issued() bool { return t.OperationID != "" }

// String describes the token without revealing it.
func (t JoinToken) String() string {
	return fmt.Sprintf("join token for %q (operation %s, expires %s)",
		t.ServerName, t.OperationID, t.ExpiresAt.UTC().Format(time.RFC3339))
}

// GoString is String, so %#v does not reveal the token either.
func (t JoinToken) GoString() string { return "incus.JoinToken{" + t.String() + "}" }

// Format makes every fmt verb (%v, %+v, %#v, %s, %q, %x…) print the safe description.
func (t JoinToken) Format(f fmt.State, verb rune) {
	switch verb {
	case 'q':
		fmt.Fprintf(f, "%q", t.String())
	case 'v':
		if f.Flag('#') {
			io.WriteString(f, t.GoString())
			return
		}
		io.WriteString(f, t.String())
	default:
		io.WriteString(f, t.String())
	}
}

// LogValue logs the name, operation and expiry only.
func (t JoinToken) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("server_name", t.ServerName),
		slog.String("operation", t.OperationID),
		slog.Time("expires_at", t.ExpiresAt),
	)
}

// MarshalJSON encodes the name, operation and expiry only.
func (t JoinToken) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ServerName  string    `json:"server_name"`
		OperationID string    `json:"operation_id"`
		ExpiresAt   time.Time `json:"expires_at"`
	}{t.ServerName, t.OperationID, t.ExpiresAt})
}

// tokenJSON is the CLI's token layout; the field order is the wire order.
type tokenJSON struct {
	ServerName  string    `json:"server_name"`
	Fingerprint string    `json:"fingerprint"`
	Addresses   []string  `json:"addresses"`
	Secret      string    `json:"secret"`
	ExpiresAt   time.Time `json:"expires_at"`
}

// encodeJoinToken builds the token string the way the Incus CLI does.
func encodeJoinToken(t tokenJSON) (string, error) {
	if t.Addresses == nil {
		t.Addresses = []string{}
	}
	b, err := json.Marshal(t) // compact, HTML-escaped, struct field order: as the CLI
	if err != nil {
		return "", err
	}
	defer clear(b)
	return base64.StdEncoding.EncodeToString(b), nil
}

// ParseJoinToken decodes an encoded join token (as a joining host would) and checks that
// it carries what a join needs: name, secret, fingerprint and at least one address. The
// result keeps the encoded form behind Reveal. Errors never quote the token.
func ParseJoinToken(encoded string) (JoinToken, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		return JoinToken{}, errors.New("invalid join token: not standard base64")
	}
	defer clear(raw)
	var tj tokenJSON
	if err := json.Unmarshal(raw, &tj); err != nil {
		return JoinToken{}, errors.New("invalid join token: not the expected JSON")
	}
	switch {
	case tj.ServerName == "":
		return JoinToken{}, errors.New("invalid join token: no server name")
	case tj.Secret == "":
		return JoinToken{}, errors.New("invalid join token: no secret")
	case tj.Fingerprint == "":
		return JoinToken{}, errors.New("invalid join token: no cluster certificate fingerprint")
	case len(tj.Addresses) == 0:
		return JoinToken{}, errors.New("invalid join token: no member addresses")
	}
	return JoinToken{
		ServerName:  tj.ServerName,
		Fingerprint: tj.Fingerprint,
		Addresses:   tj.Addresses,
		ExpiresAt:   tj.ExpiresAt,
		reveal:      sealToken(strings.TrimSpace(encoded)),
	}, nil
}

// tokenOperation is the async answer to POST /1.0/cluster/members.
type tokenOperation struct {
	ID         string `json:"id"`
	Class      string `json:"class"`
	StatusCode int    `json:"status_code"`
	Metadata   struct {
		ServerName  string    `json:"serverName"`
		Secret      string    `json:"secret"`
		Fingerprint string    `json:"fingerprint"`
		Addresses   []string  `json:"addresses"`
		ExpiresAt   time.Time `json:"expiresAt"`
	} `json:"metadata"`
}

// IssueJoinToken asks the cluster for a join token for a new member called name
// (POST /1.0/cluster/members). The name is checked with the member-name rule
// (machines.ValidateName) first, because Incus accepts names it cannot join with. Issuing again for the same name cancels the
// earlier token. The expiry comes from cluster.join_token_expiry (default 3 hours).
func (c *Client) IssueJoinToken(ctx context.Context, name string) (JoinToken, error) {
	if err := machines.ValidateName(name); err != nil {
		return JoinToken{}, fmt.Errorf("issue join token: %w", err)
	}
	// The issue goes through the seam as one write (its call names the token, not the
	// request's body); planned, no token exists and the answer says so (Issued).
	var op tokenOperation
	var res result
	planned, err := c.write(ctx, func() plan.Call { return tokenCall(name, c.cluster) }, func() (err error) {
		res, err = c.send(ctx, request{
			method: http.MethodPost,
			path:   "/1.0/cluster/members",
			body:   map[string]string{"server_name": name},
		}, &op)
		return err
	})
	if planned {
		return c.plannedJoinToken(ctx, name)
	}
	if err != nil {
		return JoinToken{}, fmt.Errorf("issue join token for %q: %w", name, err)
	}
	md := op.Metadata
	switch {
	case res.typ != typeAsync || op.Class != "token":
		return JoinToken{}, fmt.Errorf("issue join token for %q: Incus answered a %s %q operation, not a token", name, res.typ, op.Class)
	case op.StatusCode != StatusRunning:
		return JoinToken{}, fmt.Errorf("issue join token for %q: token operation %s is %d, not running", name, op.ID, op.StatusCode)
	case md.ServerName != name || md.Secret == "" || md.Fingerprint == "" || len(md.Addresses) == 0:
		return JoinToken{}, fmt.Errorf("issue join token for %q: token operation %s lacks the name, secret, fingerprint or addresses", name, op.ID)
	}
	enc, err := encodeJoinToken(tokenJSON{
		ServerName:  md.ServerName,
		Fingerprint: md.Fingerprint,
		Addresses:   md.Addresses,
		Secret:      md.Secret,
		ExpiresAt:   md.ExpiresAt,
	})
	if err != nil {
		return JoinToken{}, fmt.Errorf("issue join token for %q: encode: %w", name, err)
	}
	return JoinToken{
		ServerName:  md.ServerName,
		OperationID: op.ID,
		Fingerprint: md.Fingerprint,
		Addresses:   slices.Clone(md.Addresses),
		ExpiresAt:   md.ExpiresAt,
		reveal:      sealToken(enc),
	}, nil
}

// PendingJoinToken is a join token that has not been used, revoked or replaced yet. Only
// these three facts are read from Incus; the secret is never decoded.
type PendingJoinToken struct {
	ServerName  string
	ExpiresAt   time.Time // may be in the past: Incus cancels expired tokens once a minute
	OperationID string
}

// pendingMeta decodes only serverName and expiresAt from an operation's metadata, and
// tolerates metadata of any other shape (other operations carry anything).
type pendingMeta struct {
	ServerName string
	HasName    bool
	ExpiresAt  time.Time
}

func (m *pendingMeta) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil
	}
	var only struct {
		ServerName json.RawMessage `json:"serverName"`
		ExpiresAt  json.RawMessage `json:"expiresAt"`
	}
	if json.Unmarshal(b, &only) != nil {
		return nil
	}
	if len(only.ServerName) > 0 && only.ServerName[0] == '"' && json.Unmarshal(only.ServerName, &m.ServerName) == nil {
		m.HasName = true
	}
	_ = json.Unmarshal(only.ExpiresAt, &m.ExpiresAt)
	return nil
}

type pendingOp struct {
	ID         string      `json:"id"`
	Class      string      `json:"class"`
	StatusCode int         `json:"status_code"`
	Metadata   pendingMeta `json:"metadata"`
}

// PendingJoinTokens lists the cluster's pending join tokens (from GET
// /1.0/operations?recursion=1: class "token", status Running, with a serverName; the
// listing is cluster-wide). Certificate-add tokens have no serverName and are skipped.
// The result is sorted by name.
func (c *Client) PendingJoinTokens(ctx context.Context) ([]PendingJoinToken, error) {
	var byStatus map[string][]pendingOp
	if _, err := c.get(ctx, "/1.0/operations", url.Values{"recursion": {"1"}}, &byStatus); err != nil {
		return nil, fmt.Errorf("list pending join tokens: %w", err)
	}
	var out []PendingJoinToken
	for _, ops := range byStatus {
		for _, op := range ops {
			if op.Class != "token" || op.StatusCode != StatusRunning || !op.Metadata.HasName {
				continue
			}
			out = append(out, PendingJoinToken{
				ServerName:  op.Metadata.ServerName,
				ExpiresAt:   op.Metadata.ExpiresAt,
				OperationID: op.ID,
			})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ServerName != out[j].ServerName {
			return out[i].ServerName < out[j].ServerName
		}
		return out[i].OperationID < out[j].OperationID
	})
	return out, nil
}

// RevokeJoinToken cancels the pending join token for name, as `incus cluster revoke-token`
// does: it finds the token operation by name and deletes it. With no pending token it
// returns an error matching ErrNoJoinToken and ErrNotFound.
func (c *Client) RevokeJoinToken(ctx context.Context, name string) error {
	pending, err := c.PendingJoinTokens(ctx)
	if err != nil {
		return fmt.Errorf("revoke join token for %q: %w", name, err)
	}
	found := false
	for _, p := range pending {
		if p.ServerName != name {
			continue
		}
		found = true
		if err := c.CancelOperation(ctx, p.OperationID); err != nil {
			return fmt.Errorf("revoke join token for %q: %w", name, err)
		}
	}
	if !found {
		return fmt.Errorf("revoke join token for %q: %w", name, ErrNoJoinToken)
	}
	return nil
}
