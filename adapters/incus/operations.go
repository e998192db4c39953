package incus

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Operation is an Incus background operation. Its metadata is deliberately not kept: for
// join tokens it holds the secret.
type Operation struct {
	ID          string              `json:"id"`
	Class       string              `json:"class"` // "task", "token" or "websocket"
	Description string              `json:"description"`
	CreatedAt   time.Time           `json:"created_at"`
	UpdatedAt   time.Time           `json:"updated_at"`
	Status      string              `json:"status"`
	StatusCode  int                 `json:"status_code"` // see the Status* constants; 200 and above are final
	Resources   map[string][]string `json:"resources"`
	MayCancel   bool                `json:"may_cancel"`
	Err         string              `json:"err"`
	Location    string              `json:"location"` // the member that owns it
}

// Final reports whether the operation has ended (Success, Failure or Cancelled).
func (o Operation) Final() bool { return o.StatusCode >= StatusSuccess }

// Operation reads one operation (forwarded by Incus to the member that owns it). Finished
// operations disappear after a few seconds (404).
func (c *Client) Operation(ctx context.Context, id string) (Operation, error) {
	var op Operation
	_, err := c.get(ctx, "/1.0/operations/"+seg(id), nil, &op)
	return op, err
}

// CancelOperation cancels (deletes) a running operation. Incus answers 400 "Only running
// operations can be cancelled" for one that has finished.
func (c *Client) CancelOperation(ctx context.Context, id string) error {
	_, err := c.call(ctx, request{method: http.MethodDelete, path: "/1.0/operations/" + seg(id)}, nil)
	return err
}

// WaitOperation waits up to timeout (at least one second, rounded up to whole seconds) for
// the operation to finish, through GET /1.0/operations/{id}/wait?timeout=N.
//
// It returns the final operation and nil on Success, the operation and an *OperationError
// on Failure or Cancelled, and an error wrapping ErrWaitTimeout (and the *Error Incus sent)
// when the wait ran out first. Incus answers a timed-out wait with HTTP 200 and an error
// body, so the decision is taken from the body's type, then from metadata.status_code.
func (c *Client) WaitOperation(ctx context.Context, id string, timeout time.Duration) (Operation, error) {
	secs := int(math.Ceil(timeout.Seconds()))
	if secs < 1 {
		secs = 1
	}
	req := request{
		method:  http.MethodGet,
		path:    "/1.0/operations/" + seg(id) + "/wait",
		query:   url.Values{"timeout": {strconv.Itoa(secs)}},
		timeout: time.Duration(secs)*time.Second + 15*time.Second,
	}
	var op Operation
	res, err := c.call(ctx, req, &op)
	if err != nil {
		var ie *Error
		if errors.As(err, &ie) && res.httpStatus == http.StatusOK {
			// HTTP 200 with an error body: the server-side wait timed out.
			return Operation{ID: id}, fmt.Errorf("wait for operation %s: %w: %w", id, ErrWaitTimeout, err)
		}
		return Operation{ID: id}, err
	}
	return op, operationOutcome(op)
}

// operationOutcome maps a waited-for operation to nil or an error.
func operationOutcome(op Operation) error {
	switch {
	case op.StatusCode == StatusSuccess:
		return nil
	case op.StatusCode >= StatusFailure:
		return &OperationError{ID: op.ID, Description: op.Description, Status: op.Status, StatusCode: op.StatusCode, Err: op.Err}
	default:
		return fmt.Errorf("wait for operation %s: %w (status %s)", op.ID, ErrWaitTimeout, op.Status)
	}
}

// waitAsync waits for the operation an async answer created and reports its outcome.
func (c *Client) waitAsync(ctx context.Context, what string, res result) error {
	if res.typ != typeAsync || res.operation == "" {
		return nil // a sync answer: already done
	}
	_, err := c.WaitOperation(ctx, operationID(res.operation), c.timeout)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
