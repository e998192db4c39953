package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"time"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/internal/apperr"
)

// readRequest reads a GraphQL POST whole, within MaxBodyBytes and the body read timeout,
// and checks it is one JSON request object before gqlgen sees it, so that every refusal
// carries a documented code and none echoes the body. A refused POST writes one audit
// event (RejectedRequest): it may have been a mutation. Websocket upgrades pass
// untouched: they are hijacked connections with limits of their own.
func (g *gate) readRequest(bodyTimeout time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" {
			next.ServeHTTP(w, r)
			return
		}
		// Per request, not on the server: a deadline on the connection would also end the
		// websockets it is hijacked for. It stays for a request refused unread, so that
		// the server's draining of its body cannot be held open either.
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(bodyTimeout))
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, http.StatusMethodNotAllowed, apperr.InvalidInput, "send GraphQL as an HTTP POST with a JSON body, or subscribe over a websocket (graphql-transport-ws)")
			return
		}
		reject := func(status int, code apperr.Code, bytes int64, msg string) {
			g.recordRequest(r.Context(), requestRecord{action: RejectedRequest, outcome: audit.OutcomeOfCode(string(code)), message: msg,
				details: map[string]any{"status": status, "bytes": bytes, "contentType": r.Header.Get("Content-Type")}})
			writeError(w, status, code, msg)
		}
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			reject(http.StatusUnsupportedMediaType, apperr.InvalidInput, r.ContentLength,
				`send the request as Content-Type: application/json, a JSON object such as {"query": "…", "variables": {…}}`)
			return
		}
		tooLarge := fmt.Sprintf("the request body is larger than %d bytes (1 MiB): send less at once", MaxBodyBytes)
		if r.ContentLength > MaxBodyBytes {
			w.Header().Set("Connection", "close")
			reject(http.StatusRequestEntityTooLarge, apperr.RequestTooLarge, r.ContentLength, tooLarge)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			w.Header().Set("Connection", "close")
			reject(http.StatusRequestTimeout, apperr.InvalidInput, int64(len(body)),
				fmt.Sprintf("the request body did not arrive within %s: send it at once", bodyTimeout))
			return
		case err != nil:
			return // the client left: there is no one to answer
		case len(body) > MaxBodyBytes:
			w.Header().Set("Connection", "close")
			reject(http.StatusRequestEntityTooLarge, apperr.RequestTooLarge, int64(len(body)), tooLarge)
			return
		}
		// Read whole: the connection's own read (which notices a client leaving during a
		// long mutation) must not time out.
		_ = rc.SetReadDeadline(time.Time{})
		if msg := checkRequestJSON(body); msg != "" {
			reject(http.StatusBadRequest, apperr.InvalidInput, int64(len(body)), msg)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r.WithContext(withHTTPPost(r.Context())))
	})
}

// checkRequestJSON says what is wrong with a GraphQL request body, or "".
func checkRequestJSON(body []byte) string {
	const shape = `{"query": "…", "variables": {…}, "operationName": "…"}`
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		return "a JSON array (a batch of operations) is not accepted: send one request object per POST, " + shape
	}
	var req struct {
		Query         json.RawMessage `json:"query"`
		OperationName json.RawMessage `json:"operationName"`
		Variables     json.RawMessage `json:"variables"`
		Extensions    json.RawMessage `json:"extensions"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			return fmt.Sprintf("the request body is not valid JSON (at byte %d): send %s", syntax.Offset, shape)
		}
		return "the request body is not a JSON object: send " + shape
	}
	var query string
	if json.Unmarshal(req.Query, &query) != nil || query == "" {
		return `the request has no "query" string: send ` + shape
	}
	if !isNull(req.OperationName) && json.Unmarshal(req.OperationName, new(string)) != nil {
		return `"operationName" must be a string (or absent)`
	}
	if !isNull(req.Variables) && json.Unmarshal(req.Variables, new(map[string]json.RawMessage)) != nil {
		return `"variables" must be a JSON object of the operation's variables (or absent)`
	}
	if !isNull(req.Extensions) && json.Unmarshal(req.Extensions, new(map[string]json.RawMessage)) != nil {
		return `"extensions" must be a JSON object (or absent)`
	}
	return ""
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}
