package incus

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/plan"
)

// A dry run sends no request that changes anything: call hands it to the seam
// (plan.Writes), which records it as a call of the plan, and answers as an empty success; reads
// go to Incus as usual, so everything the caller decides from them is decided as in the
// real call.

// describe is the call req, which would change something, stands for in a plan. For a PUT or
// PATCH it reads the resource first and shows each field of the body before → after.
func (c *Client) describe(ctx context.Context, req request) plan.Call {
	call := plan.Call{System: plan.Incus, Request: req.method + " " + req.uri(), Target: targetOf(req.path)}
	if req.body != nil {
		after := flatten(req.body)
		before := map[string]string{}
		if req.method == http.MethodPut || req.method == http.MethodPatch {
			var cur any
			if _, err := c.get(ctx, req.path, nil, &cur); err == nil {
				before = flatten(cur)
			}
		}
		var owned map[string]json.RawMessage // the fields a PUT rewrites
		if b, err := json.Marshal(req.body); err == nil && req.method == http.MethodPut {
			_ = json.Unmarshal(b, &owned)
		}
		call.Changes = changes(before, after, owned)
	}
	return call
}

// tokenCall is the call that issues a join token for name, in cluster ("" unnamed): its
// target names both, so a plan says which cluster the machine joins.
func tokenCall(name, cluster string) plan.Call {
	target := name
	if cluster != "" {
		target = name + " in cluster " + cluster
	}
	return plan.Call{System: plan.Incus, Request: http.MethodPost + " /1.0/cluster/members", Target: target,
		Changes: []plan.Change{{Field: "join token", After: "issued for " + name + " (not in a plan)"}}}
}

// plannedJoinToken is IssueJoinToken's answer in a dry run: no token was issued (Issued
// is false: no operation holds it), and its Reveal is a placeholder that no cluster
// accepts (the user data of a plan is only shown by size and hash). The addresses are the
// online members' (those Incus would name); the expiry is Incus's default of three hours.
func (c *Client) plannedJoinToken(ctx context.Context, name string) (JoinToken, error) {
	members, err := c.Members(ctx)
	if err != nil {
		return JoinToken{}, fmt.Errorf("issue join token for %q: %w", name, err)
	}
	var addrs []string
	for _, m := range members {
		if u, err := url.Parse(m.URL); err == nil && m.Status == MemberOnline && u.Host != "" {
			addrs = append(addrs, u.Host)
		}
	}
	return JoinToken{ServerName: name, Addresses: addrs, ExpiresAt: time.Now().Add(3 * time.Hour).Truncate(time.Second),
		reveal: sealToken("dry-run-no-token")}, nil
}

// shown hides the values of a setting whose name is a secret's (by the audit's rule: a
// plan is stored in its audit event), keeping that it changes.
func shown(c plan.Change) plan.Change {
	if audit.IsSecretName(c.Field) {
		for _, v := range []*string{&c.Before, &c.After} {
			if *v != "" {
				*v = audit.Redacted
			}
		}
	}
	return c
}

// targetOf is what a request's path is about: its last segment, or for a member's
// state (/1.0/cluster/members/{name}/state: evacuate, restore) the member.
func targetOf(p string) string {
	if p == "" || strings.HasSuffix(p, "/") {
		return ""
	}
	if dir, base := path.Split(p); base == "state" && strings.HasPrefix(dir, "/1.0/cluster/members/") {
		p = strings.TrimSuffix(dir, "/")
	}
	t, err := url.PathUnescape(path.Base(p))
	if err != nil {
		return path.Base(p)
	}
	return t
}

// flatten turns a JSON document into field → value: objects by dotted keys, lists as
// their sorted comma-joined items (roles, groups).
func flatten(v any) map[string]string {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var doc any
	if json.Unmarshal(b, &doc) != nil {
		return nil
	}
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, e := range t {
				key := k
				if prefix != "" {
					key = prefix + "." + k
				}
				walk(key, e)
			}
		case []any:
			items := make([]string, 0, len(t))
			for _, e := range t {
				items = append(items, fmt.Sprint(e))
			}
			sort.Strings(items)
			out[prefix] = strings.Join(items, ",")
		case nil:
			out[prefix] = ""
		default:
			out[prefix] = fmt.Sprint(t)
		}
	}
	walk("", doc)
	return out
}

// changes lists the fields whose value differs. A field of the resource inside one the
// body rewrites (owned: a PUT's top-level fields) that the body lacks is removed (a config
// key); fields the body does not rewrite (status, url, …) are left out.
func changes(before, after map[string]string, owned map[string]json.RawMessage) []plan.Change {
	var out []plan.Change
	for k, a := range after {
		if b := before[k]; b != a {
			out = append(out, shown(plan.Change{Field: k, Before: b, After: a}))
		}
	}
	for k, b := range before {
		if _, ok := after[k]; ok || b == "" {
			continue
		}
		top, _, _ := strings.Cut(k, ".")
		if _, ok := owned[top]; ok {
			out = append(out, shown(plan.Change{Field: k, Before: b}))
		}
	}
	slices.SortFunc(out, func(a, b plan.Change) int { return strings.Compare(a.Field, b.Field) })
	return out
}
