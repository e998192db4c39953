package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The limits of one audit event. Whatever a caller sends, the row it leaves is bounded by
// these, so the trail can neither be flooded by large values nor skipped by bytes the
// database refuses (PostgreSQL text and jsonb take no NUL and no invalid UTF-8).
const (
	// MaxValueBytes is the longest string value of the parameters or details kept whole;
	// a longer one keeps its first MaxValueBytes, its length and its SHA-256.
	MaxValueBytes = 1024
	// MaxEventBytes bounds the parameters and details of one event together, as JSON.
	MaxEventBytes = 8192
	// MaxErrorBytes bounds the error message.
	MaxErrorBytes = 1024
	// MaxMachineBytes bounds the machine column (machine names are at most 63).
	MaxMachineBytes = 128
	// MaxNameBytes bounds the actor and action columns.
	MaxNameBytes = 128
	// MaxRequestIDBytes bounds the request id column.
	MaxRequestIDBytes = 64
	// MaxItems is how many elements of a list, or keys of an object, one level keeps.
	MaxItems = 64
	// maxDepth is how deeply nested values are kept.
	maxDepth = 8
)

// shrinking are the value limits tried in turn until an event's parameters and details
// fit MaxEventBytes; past the last, they are replaced by a summary.
var shrinking = []limits{{MaxValueBytes, MaxItems}, {128, 16}}

type limits struct{ value, items int }

// Bound returns e as it may be stored: every text column sanitised (see Text) and cut to
// its limit, the parameters and details with secret values redacted, strings that hold NUL
// or invalid UTF-8 or exceed MaxValueBytes replaced by a Capped description, lists and
// objects cut to MaxItems, and both together within MaxEventBytes.
func Bound(e Event) Event {
	e.Actor = Text(e.Actor, MaxNameBytes)
	e.Action = Text(e.Action, MaxNameBytes)
	e.Machine = StoredMachine(e.Machine)
	e.Error = Text(e.Error, MaxErrorBytes)
	e.RequestID = Text(e.RequestID, MaxRequestIDBytes)
	e.Parameters, e.Details = boundMaps(e.Parameters, e.Details)
	return e
}

// StoredMachine is the machine column as Bound stores name: filters on the trail compare
// with it, so that a name the database could not hold as sent still finds its events.
func StoredMachine(name string) string { return Text(name, MaxMachineBytes) }

func boundMaps(params, details map[string]any) (map[string]any, map[string]any) {
	p, pSize := boundMap(params, shrinking[0])
	d, dSize := boundMap(details, shrinking[0])
	for _, l := range shrinking[1:] {
		if pSize+dSize <= MaxEventBytes {
			return p, d
		}
		// Parameters come from the caller: they shrink first.
		p, pSize = boundMap(params, l)
		if pSize+dSize <= MaxEventBytes {
			return p, d
		}
		d, dSize = boundMap(details, l)
	}
	if pSize+dSize > MaxEventBytes {
		p, pSize = summary(p, pSize)
	}
	if pSize+dSize > MaxEventBytes {
		d, _ = summary(d, dSize)
	}
	return p, d
}

func boundMap(m map[string]any, l limits) (map[string]any, int) {
	out, _ := boundValue(m, l, 0, false).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	return out, jsonSize(out)
}

// summary stands for an object too large to keep even shrunk: its size and SHA-256 as
// JSON, and its first keys.
func summary(m map[string]any, size int) (map[string]any, int) {
	raw, _ := json.Marshal(m)
	sum := sha256.Sum256(raw)
	keys := sortedKeys(m)
	if len(keys) > 16 {
		keys = keys[:16]
	}
	for i, k := range keys {
		keys[i] = Text(k, 64)
	}
	out := map[string]any{"omitted": map[string]any{"jsonBytes": size, "sha256": hex.EncodeToString(sum[:]), "keys": keys}}
	return out, jsonSize(out)
}

func jsonSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return MaxEventBytes + 1
	}
	return len(b)
}

var plainNumber = regexp.MustCompile(`^-?[0-9]{1,40}(\.[0-9]{1,20})?([eE][-+]?[0-9]{1,3})?$`)

// Redacted is what a secret value is stored as.
const Redacted = "[redacted]"

func boundValue(v any, l limits, depth int, secret bool) any {
	if secret {
		return Redacted
	}
	if depth > maxDepth {
		return "[nested too deeply]"
	}
	switch t := v.(type) {
	case nil, bool, int, int32, int64, uint, uint32, uint64:
		return t
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return strconv.FormatFloat(t, 'g', -1, 64)
		}
		return t
	case string:
		return boundString(t, l.value)
	case json.Number:
		// PostgreSQL's numeric refuses huge exponents (1e999999): keep such a number as text.
		if plainNumber.MatchString(string(t)) {
			return t
		}
		return boundString(string(t), 64)
	case map[string]any:
		keys := sortedKeys(t)
		out := make(map[string]any, min(len(keys), l.items)+1)
		for i, k := range keys {
			if i == l.items {
				out["[more keys]"] = len(keys) - l.items
				break
			}
			key := boundKey(k, out)
			out[key] = boundValue(t[k], l, depth+1, secretIn(t, k))
		}
		return out
	case []any:
		n := min(len(t), l.items)
		out := make([]any, 0, n+1)
		for _, e := range t[:n] {
			out = append(out, boundValue(e, l, depth+1, false))
		}
		if len(t) > n {
			out = append(out, map[string]any{"more": len(t) - n})
		}
		return out
	default:
		// Typed details (structs, typed slices): keep what their JSON says.
		raw, err := json.Marshal(t)
		if err != nil {
			return fmt.Sprintf("[not JSON: %T]", t)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var generic any
		if err := dec.Decode(&generic); err != nil {
			return fmt.Sprintf("[not JSON: %T]", t)
		}
		return boundValue(generic, l, depth, false)
	}
}

// boundKey is an object key as it may be stored: sanitised, cut, and still unique.
func boundKey(k string, taken map[string]any) string {
	key := k
	if len(k) > 128 || !storable(k) {
		key = Text(k, 128)
	}
	for i := 2; ; i++ {
		if _, dup := taken[key]; !dup {
			return key
		}
		key = Text(k, 120) + "#" + strconv.Itoa(i)
	}
}

// boundString keeps s as it is when the database can store it and it is at most limit
// bytes long. Otherwise it stands for s with an object:
//
//	{"text": its start (at most limit bytes), "bytes": its length, "sha256": of its bytes as
//	 sent (to match it with a copy), "truncated": text is only its start,
//	 "escaped": NUL, invalid UTF-8 and backslash are written \x00, \xff and \\ in text}
func boundString(s string, limit int) any {
	ok := storable(s)
	if ok && len(s) <= limit {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	text := s
	if !ok {
		text = escape(s, false)
	}
	kept := cut(text, limit)
	return map[string]any{"text": kept, "bytes": len(s), "sha256": hex.EncodeToString(sum[:]),
		"truncated": len(kept) < len(text), "escaped": !ok}
}

// storable reports whether PostgreSQL stores s as it is in text and jsonb.
func storable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// Text returns s as a text column keeps it: NUL, control characters, invalid UTF-8 and
// the characters that reorder text on a terminal written as \xNN or \uNNNN, and cut to
// max bytes with "…" and the original length when longer.
func Text(s string, max int) string {
	if len(s) <= max && printable(s) {
		return s
	}
	text := escape(s, true)
	if len(text) <= max {
		return text
	}
	suffix := fmt.Sprintf("…[%d bytes]", len(s))
	return cut(text, max-len(suffix)) + suffix
}

func printable(s string) bool {
	for _, r := range s {
		if needsEscape(r) {
			return false
		}
	}
	return utf8.ValidString(s)
}

// needsEscape: C0 and C1 controls, DEL, and bidirectional overrides (which make a line
// read differently from what it holds).
func needsEscape(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x2028 || r == 0x2029 ||
		(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// escape writes NUL and invalid UTF-8 (and, for text columns, every character
// needsEscape names) as \xNN or \uNNNN. In a JSON value the result is marked Escaped, so
// a backslash is doubled to keep it unambiguous.
func escape(s string, text bool) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == 0 || (text && needsEscape(r)):
			if r < 0x80 {
				fmt.Fprintf(&b, `\x%02x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		case r == '\\' && !text:
			b.WriteString(`\\`)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// cut returns the longest prefix of s (valid UTF-8) of at most n bytes that ends on a
// character boundary.
func cut(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
