package server

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apelora/fabric/internal/apperr"
	"github.com/apelora/fabric/internal/server/graphqlws"
)

// limitsDoc is the document whose "## Limits" table lists the request limits.
const limitsDoc = "docs/security.md"

// The Limits table of docs/security.md says what the code enforces: each row's value is
// checked against the constant it describes, so changing one without the other fails here.
func TestLimitsTableIsTheCodes(t *testing.T) {
	doc, err := os.ReadFile("../../" + limitsDoc)
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	start := strings.Index(section, "\n## Limits\n")
	if start < 0 {
		t.Fatalf(`%s has no "## Limits" section`, limitsDoc)
	}
	section = section[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	rows := map[string]string{} // the limit's words → its value
	for _, m := range regexp.MustCompile(`(?m)^\| ([^|]+) \| ([^|]+) \| [^|]+ \|$`).FindAllStringSubmatch(section, -1) {
		if _, ok := rows[m[1]]; !ok { // the first table: later ones reuse words such as "headers"
			rows[m[1]] = m[2]
		}
	}
	seconds := func(d time.Duration) string { return fmt.Sprintf("%d s", int(d/time.Second)) }
	for limit, want := range map[string]string{
		"request body (`/graphql`)":                      fmt.Sprintf("%d MiB", MaxBodyBytes>>20),
		"time to send the headers":                       seconds(HeaderReadTimeout),
		"time to send the body, once the headers are in": seconds(BodyReadTimeout),
		"headers": fmt.Sprintf("%d KiB", MaxHeaderBytes>>10),
		"root fields of one operation, aliases and fragments included": fmt.Sprint(MaxRootFields),
		"depth of an operation (introspection not counted)":            fmt.Sprint(maxDepth),
		"complexity of an operation (one per field)":                   fmt.Sprint(maxComplexity),
		"a caller's value quoted in an error message":                  fmt.Sprintf("%d bytes, escaped, with its length", apperr.QuoteLimit),
		"requests without a valid identity, per client address (an IPv6 one by its /64)": fmt.Sprintf("%d at once, then one per %s",
			DefaultAuthFailureLimit.Burst, seconds(DefaultAuthFailureLimit.Every)),
		"a websocket message": fmt.Sprintf("%d MiB", graphqlws.MaxMessageBytes>>20),
		"websockets one identity holds open on one server (`" + EnvSocketsPerIdentity + "`)":                                     fmt.Sprint(DefaultIdentityLimits.Sockets),
		"subscriptions one identity holds on one server, over all its websockets (`" + EnvSubscriptionsPerIdentity + "`)":        fmt.Sprint(DefaultIdentityLimits.Subscriptions),
		"audit events of repeated refusals (`" + RateLimited + "`, `" + SignInFailed + "`, `" + IdentityLimited + "`), per kind": fmt.Sprintf("per minute: %d keys at once, then one per key (or one summary) at the minute's end", RefusalRowsPerWindow),
	} {
		got, ok := rows[limit]
		switch {
		case !ok:
			t.Errorf("%s's Limits table has no row %q", limitsDoc, limit)
		case got != want:
			t.Errorf("%s says %q is %q; the code enforces %q", limitsDoc, limit, got, want)
		}
	}
}
