package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBoundKeepsOrdinaryEventsAsTheyAre(t *testing.T) {
	e := Event{
		Actor: "alice", Action: "registerMachine", Machine: "node-1", RequestID: "abc",
		Error:      "a machine named \"node-1\" is already registered",
		Parameters: map[string]any{"input": map[string]any{"name": "node-1", "description": "rack 3\nslot 7", "tests": []any{"smartctl", json.Number("3")}}},
		Details:    map[string]any{"force": true, "checks": []struct{ Name string }{{"online"}}},
	}
	got := Bound(e)
	if got.Actor != e.Actor || got.Action != e.Action || got.Machine != e.Machine || got.Error != e.Error || got.RequestID != e.RequestID {
		t.Fatalf("text columns changed: %+v", got)
	}
	if !reflect.DeepEqual(got.Parameters, e.Parameters) {
		t.Fatalf("parameters changed: %v", got.Parameters)
	}
	if s := mustJSON(t, got.Details); s != `{"checks":[{"Name":"online"}],"force":true}` {
		t.Fatalf("details = %s", s)
	}
}

func TestBoundEscapesWhatTheDatabaseRefuses(t *testing.T) {
	e := Bound(Event{
		Actor: "anonymous", Action: "register\x00Machine", Machine: "node\x00-1\xff", Error: "bad \x1b[31mred\x1b[0m \u202eevil",
		Parameters: map[string]any{"input": map[string]any{"name": "a\x00b", "description": "caf\xe9 \\x00", "k\x00ey": 1}},
	})
	if e.Action != `register\x00Machine` || e.Machine != `node\x00-1\xff` || e.Error != `bad \x1b[31mred\x1b[0m \u202eevil` {
		t.Fatalf("text columns: %q %q %q", e.Action, e.Machine, e.Error)
	}
	in := e.Parameters["input"].(map[string]any)
	name := in["name"].(map[string]any)
	sum := sha256.Sum256([]byte("a\x00b"))
	if name["text"] != `a\x00b` || name["escaped"] != true || name["truncated"] != false || name["bytes"] != 3 || name["sha256"] != hex.EncodeToString(sum[:]) {
		t.Fatalf("NUL value stored as %v", name)
	}
	// Escaped text doubles backslashes, so a typed "\x00" never reads as a NUL.
	if d := in["description"].(map[string]any); d["text"] != `caf\xe9 \\x00` {
		t.Fatalf("invalid UTF-8 stored as %v", d)
	}
	if in[`k\x00ey`] != 1 {
		t.Fatalf("NUL key: %v", in)
	}
	assertStorable(t, e)
}

func TestBoundCapsLargeValuesAndEvents(t *testing.T) {
	big := strings.Repeat("é", 4<<20) // 8 MiB
	e := Bound(Event{Error: big, Machine: big, Parameters: map[string]any{"input": map[string]any{"systemId": big}}})
	v := e.Parameters["input"].(map[string]any)["systemId"].(map[string]any)
	sum := sha256.Sum256([]byte(big))
	if v["bytes"] != len(big) || v["sha256"] != hex.EncodeToString(sum[:]) || v["truncated"] != true || len(v["text"].(string)) > MaxValueBytes || !utf8.ValidString(v["text"].(string)) {
		t.Fatalf("8 MiB value stored as %d bytes of text, %v", len(v["text"].(string)), v["bytes"])
	}
	if len(e.Error) > MaxErrorBytes || len(e.Machine) > MaxMachineBytes || !strings.HasSuffix(e.Error, fmt.Sprintf("…[%d bytes]", len(big))) {
		t.Fatalf("error %d bytes, machine %d bytes", len(e.Error), len(e.Machine))
	}

	// 50 aliases sharing one 200 KB value (the flood), in one event.
	aliases := map[string]any{}
	for i := range 50 {
		aliases[fmt.Sprintf("a%02d", i)] = map[string]any{"description": strings.Repeat("x", 200<<10)}
	}
	e = Bound(Event{Parameters: aliases, Details: map[string]any{"note": "kept"}})
	if n := len(mustJSON(t, e.Parameters)) + len(mustJSON(t, e.Details)); n > MaxEventBytes {
		t.Fatalf("event is %d bytes of JSON", n)
	}
	if e.Details["note"] != "kept" {
		t.Fatalf("details were shrunk before the caller's parameters: %v", e.Details)
	}
	if got := e.Parameters["a00"].(map[string]any)["description"].(map[string]any); got["bytes"] != 200<<10 {
		t.Fatalf("shrunk value lost its length: %v", got)
	}

	// Thousands of keys, long lists and deep nesting.
	wide := map[string]any{}
	for i := range 5000 {
		wide[strings.Repeat("k", 300)+fmt.Sprint(i)] = strings.Repeat("v", 2000)
	}
	deep := map[string]any{"x": "bottom"}
	for range 100 {
		deep = map[string]any{"x": deep, "list": make([]any, 10000)}
	}
	e = Bound(Event{Parameters: map[string]any{"wide": wide, "deep": deep}, Details: wide})
	if n := len(mustJSON(t, e.Parameters)) + len(mustJSON(t, e.Details)); n > MaxEventBytes {
		t.Fatalf("event is %d bytes of JSON", n)
	}
	assertStorable(t, e)
}

func TestBoundRedactsSecretsAtAnyDepth(t *testing.T) {
	e := Bound(Event{
		Parameters: map[string]any{"input": map[string]any{"joinToken": "tok", "list": []any{map[string]any{"api_key": "k", "password": map[string]any{"x": "p"}}}}},
		Details:    map[string]any{"userData": "#cloud-config secret"},
	})
	s := mustJSON(t, e.Parameters) + mustJSON(t, e.Details)
	for _, secret := range []string{`"tok"`, `"k"`, `"p"`, "cloud-config"} {
		if strings.Contains(s, secret) {
			t.Fatalf("%s kept in %s", secret, s)
		}
	}
}

func TestText(t *testing.T) {
	cases := map[string]string{
		"plain":        "plain",
		"tab\tand\nnl": `tab\x09and\x0anl`,
		"\xff\xfe":     `\xff\xfe`,
		"\u0085":       `\u0085`,
		"é":            "é",
	}
	for in, want := range cases {
		if got := Text(in, 100); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Text(strings.Repeat("a", 200), 64); len(got) > 64 || !strings.HasSuffix(got, "…[200 bytes]") {
		t.Errorf("cut = %q", got)
	}
}

// FuzzRedact: whatever arguments a caller sends, no value under a secret-named key
// survives Redact or Bound, a bounded event fits its limits and the database, and so does
// any text column.
func FuzzRedact(f *testing.F) {
	f.Add([]byte(`{"input":{"name":"node-1","joinToken":"SECRET","nested":[{"apiKey":"SECRET"}]}}`), "SECRET")
	f.Add([]byte(`{"password":{"a":["SECRET"]},"user-data":"SECRET","Authorization":"Bearer SECRET"}`), "SECRET")
	f.Add([]byte(`{"x\u0000":"\u0000","token":1e999999}`), "1e999999")
	f.Add([]byte(`[]`), "a\x00b\xff\u202e"+strings.Repeat("é", 600))
	f.Fuzz(func(t *testing.T, doc []byte, secret string) {
		var args map[string]any
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber()
		if dec.Decode(&args) != nil {
			args = map[string]any{"value": string(doc)}
		}
		// Plant the secret under secret-named keys at several depths.
		args["token"] = secret
		args["nested"] = map[string]any{"apiKey": secret, "list": []any{map[string]any{"password": secret}}}
		red := Redact(args)
		walkSecrets(t, red, false)
		b := Bound(Event{Parameters: args, Details: args})
		walkSecrets(t, b.Parameters, false)
		walkSecrets(t, b.Details, false)
		if n := len(mustJSON(t, b.Parameters)) + len(mustJSON(t, b.Details)); n > MaxEventBytes {
			t.Fatalf("bounded event is %d bytes of JSON", n)
		}
		assertStorable(t, b)
		// Text columns: always storable, printable and within their limit.
		for _, max := range []int{24, MaxNameBytes, MaxErrorBytes} {
			got := Text(secret, max)
			if len(got) > max || !printable(got) || len(secret) <= max && printable(secret) && got != secret {
				t.Fatalf("Text(%q, %d) = %q", secret, max, got)
			}
		}
	})
}

// walkSecrets fails when a value under a secret-named key is anything but Redacted.
func walkSecrets(t *testing.T, v any, underSecret bool) {
	t.Helper()
	if underSecret {
		if v != Redacted {
			t.Fatalf("secret value kept: %#v", v)
		}
		return
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			walkSecrets(t, e, isSecretKey(k))
		}
	case []any:
		for _, e := range x {
			walkSecrets(t, e, false)
		}
	}
}

func assertStorable(t *testing.T, e Event) {
	t.Helper()
	for _, s := range []string{e.Actor, e.Action, e.Machine, e.Error, e.RequestID} {
		if !storable(s) {
			t.Fatalf("text column %q cannot be stored", s)
		}
	}
	for _, m := range []map[string]any{e.Parameters, e.Details} {
		walkStrings(m, func(s string) {
			if !storable(s) {
				t.Fatalf("value %q cannot be stored, in %s", s, mustJSON(t, m))
			}
		})
	}
}

func walkStrings(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case json.Number:
		f(string(x))
	case map[string]any:
		for k, e := range x {
			f(k)
			walkStrings(e, f)
		}
	case []any:
		for _, e := range x {
			walkStrings(e, f)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
