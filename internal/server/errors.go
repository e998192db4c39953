package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/logging"
)

func init() {
	// Every refusal before an operation runs answers HTTP 422 (gqlgen's status for its own
	// parse and validation failures), whichever check made it.
	errcode.RegisterErrorType(string(apperr.InvalidInput), errcode.KindProtocol)
	errcode.RegisterErrorType("COMPLEXITY_LIMIT_EXCEEDED", errcode.KindProtocol)
}

// maxQuotedMessage bounds a message from the GraphQL layer, which may quote a literal
// value of the query whole.
const maxQuotedMessage = 300

// presentError turns an error into a GraphQL error with a documented code. Internal
// errors are logged with the request id and never shown.
func presentError(ctx context.Context, log *slog.Logger, err error) *gqlerror.Error {
	var gqlErr *gqlerror.Error
	if errors.As(err, &gqlErr) && gqlErr.Err == nil {
		if out := requestError(gqlErr); out != nil {
			return out
		}
	}
	out := graphql.DefaultErrorPresenter(ctx, err)
	if out.Extensions == nil {
		out.Extensions = map[string]any{}
	}
	e, ok := apperr.As(err)
	if !ok || e.Code == apperr.Internal {
		log.ErrorContext(ctx, "internal error", "error", err, "path", out.Path.String())
		out.Message = fmt.Sprintf("internal error: the server log has the details under request id %s", logging.RequestID(ctx))
		out.Extensions = map[string]any{"code": string(apperr.Internal)}
		return out
	}
	out.Message = e.Message
	out.Extensions["code"] = string(e.Code)
	if e.Field != "" {
		out.Extensions["field"] = e.Field
	}
	if len(e.Details) > 0 {
		out.Extensions["details"] = e.Details
	}
	if e.Code == apperr.Unavailable && e.Cause != nil {
		log.WarnContext(ctx, "dependency unavailable", "error", err)
	}
	return out
}

// requestError maps the GraphQL layer's own errors (parse and validation failures, the
// limits) to INVALID_INPUT with a message that says what to fix, or returns nil for an
// error that is not about the request (a resolver's, which the caller presents).
func requestError(e *gqlerror.Error) *gqlerror.Error {
	code, _ := e.Extensions["code"].(string)
	if code == "" && len(e.Path) > 0 {
		return nil // an execution error gqlgen raised itself, such as a null non-null field
	}
	msg := e.Message
	switch code {
	case errcode.ParseFailed:
		msg = "the query does not parse: " + msg + at(e)
	case errcode.ValidationFailed:
		msg = validationMessage(e)
	case "COMPLEXITY_LIMIT_EXCEEDED":
		msg = "the operation asks for too much at once (" + msg + "): ask for fewer fields, aliases or list items"
	case string(apperr.InvalidInput):
		// Our own limits: their messages already say what to do.
	default:
		msg = "the request is not valid: " + msg
	}
	out := &gqlerror.Error{Message: shorten(msg), Locations: e.Locations, Extensions: map[string]any{"code": string(apperr.InvalidInput)}}
	if f, ok := e.Extensions["field"].(string); ok {
		out.Extensions["field"] = f
	}
	if len(e.Path) > 0 && e.Path[0] != ast.PathName("variable") {
		out.Path = e.Path
	}
	return out
}

func validationMessage(e *gqlerror.Error) string {
	msg := e.Message
	if len(e.Path) > 1 && e.Path[0] == ast.PathName("variable") {
		var name strings.Builder
		for i, p := range e.Path[1:] {
			switch p := p.(type) {
			case ast.PathIndex:
				fmt.Fprintf(&name, "[%d]", int(p))
			case ast.PathName:
				if i > 0 {
					name.WriteByte('.')
				}
				name.WriteString(string(p))
			}
		}
		switch msg {
		case "must be defined":
			msg = "is missing: give it a value"
		case "cannot be null":
			msg = "is null: give it a value"
		case "unknown field":
			msg = "is not a field of its input type: remove it or check its spelling"
		}
		return "variable $" + name.String() + " " + msg
	}
	if op, ok := strings.CutPrefix(msg, "operation "); ok && strings.HasSuffix(op, " not found") {
		if op = strings.TrimSuffix(op, " not found"); strings.TrimSpace(op) == "" {
			return "the document holds several operations: name the one to run in operationName"
		}
		return "the document has no operation named " + apperr.Quote(op) + ": check operationName"
	}
	if msg == "no operation provided" {
		return `the request holds no operation: send a query, mutation or subscription in "query"`
	}
	return "the query is not valid: " + msg + at(e)
}

// at says where in the query an error is, for clients that print only the message.
func at(e *gqlerror.Error) string {
	if len(e.Locations) == 0 {
		return ""
	}
	return fmt.Sprintf(" (line %d, column %d)", e.Locations[0].Line, e.Locations[0].Column)
}

// longQuote and longWord are a quoted value or a run of characters (such as a number)
// longer than apperr.QuoteLimit in a message of the GraphQL layer, which quotes values
// whole.
var (
	longQuote = regexp.MustCompile(`"((?:[^"\\]|\\.){` + strconv.Itoa(apperr.QuoteLimit) + `})(?:[^"\\]|\\.)+"`)
	longWord  = regexp.MustCompile(`([^\s"]{` + strconv.Itoa(apperr.QuoteLimit) + `})[^\s"]+`)
)

// shorten cuts the values a message quotes to a short prefix, bounds it, and escapes what
// a terminal would act on.
func shorten(msg string) string {
	msg = longQuote.ReplaceAllString(msg, `"$1…"`)
	msg = longWord.ReplaceAllString(msg, `$1…`)
	return audit.Text(msg, maxQuotedMessage)
}

func recoverPanic(log *slog.Logger) graphql.RecoverFunc {
	return func(ctx context.Context, p any) error {
		log.ErrorContext(ctx, "panic in resolver", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		return apperr.New(apperr.Internal, "internal error")
	}
}

// writeError answers a request refused before GraphQL could read it, in GraphQL's shape:
// {"errors":[{"message":…,"extensions":{"code":…}}]}.
func writeError(w http.ResponseWriter, status int, code apperr.Code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]any{{"message": msg, "extensions": map[string]string{"code": string(code)}}}})
}
