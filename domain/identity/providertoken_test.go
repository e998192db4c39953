package identity

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// A provider token never prints: not with any verb, not in a struct, not in a log line
// or JSON; Reveal alone gives it.
func TestProviderTokenNeverPrints(t *testing.T) {
	tok := NewProviderToken("rt-SECRET-123")
	holder := struct {
		Token ProviderToken
		Ptr   *ProviderToken
	}{tok, &tok}
	var out bytes.Buffer
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		fmt.Fprintf(&out, verb+" "+verb+"\n", tok, holder)
	}
	fmt.Fprintln(&out, tok, holder, tok.String(), tok.GoString())
	j, _ := json.Marshal(holder)
	out.Write(j)
	slog.New(slog.NewJSONHandler(&out, nil)).Info("x", "token", tok, "holder", holder)
	slog.New(slog.NewTextHandler(&out, nil)).Info("x", "token", tok, "holder", holder)
	if strings.Contains(out.String(), "SECRET") {
		t.Fatalf("the token printed:\n%s", out.String())
	}
	if tok.Reveal() != "rt-SECRET-123" || tok.IsZero() || !NewProviderToken("").IsZero() {
		t.Fatal("Reveal or IsZero")
	}
}
