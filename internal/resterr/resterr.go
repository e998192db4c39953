// Package resterr writes administrator's errors as REST answers:
// {"error":{"code","message"}} with the HTTP status that fits the code.
package resterr

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/logging"
)

var status = map[apperr.Code]int{
	apperr.Unauthenticated:    http.StatusUnauthorized,
	apperr.Forbidden:          http.StatusForbidden,
	apperr.InvalidInput:       http.StatusBadRequest,
	apperr.NotFound:           http.StatusNotFound,
	apperr.AlreadyExists:      http.StatusConflict,
	apperr.Busy:               http.StatusConflict,
	apperr.FailedPrecondition: http.StatusConflict,
	apperr.Unavailable:        http.StatusServiceUnavailable,
	apperr.Internal:           http.StatusInternalServerError,
	apperr.RequestTooLarge:    http.StatusRequestEntityTooLarge,
	apperr.RateLimited:        http.StatusTooManyRequests,
	apperr.PlanChanged:        http.StatusConflict,
}

// Status is the HTTP status that fits err's code.
func Status(err error) int {
	if st, ok := status[apperr.CodeOf(err)]; ok {
		return st
	}
	return http.StatusInternalServerError
}

// Write answers r with err. Internal errors are logged with the request id, never shown.
func Write(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	code := apperr.CodeOf(err)
	st := Status(err)
	msg := apperr.PublicMessage(err)
	if code == apperr.Internal {
		log.ErrorContext(r.Context(), "internal error", "error", err, "path", r.URL.Path)
		msg = "internal error: the server log has the details under request id " + logging.RequestID(r.Context())
	}
	if st == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="apelora"`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(st)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": string(code), "message": msg}})
}
