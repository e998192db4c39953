// Package route names an upstream request by a bounded label, its method and the path
// template it matches ("GET /1.0/cluster/members/{name}"), never the names and ids in
// the path nor its query: metrics labels stay few whatever the fleet holds, and carry
// nothing a query string might.
package route

import (
	"net/http"
	"strings"
)

// Other stands for any path no template matches.
const Other = "other"

// Table is a set of path templates: literal segments, and {placeholders} that match any
// one non-empty segment.
type Table struct {
	templates []template
}

type template struct {
	text string
	segs []string
}

// New builds a table. A path is matched against the templates in order.
func New(templates ...string) *Table {
	t := &Table{}
	for _, s := range templates {
		t.templates = append(t.templates, template{text: s, segs: strings.Split(s, "/")})
	}
	return t
}

// Path returns the template an escaped path matches, or Other. It splits the escaped
// form, so a name holding an escaped "/" is still one segment.
func (t *Table) Path(escaped string) string {
	segs := strings.Split(escaped, "/")
next:
	for _, tpl := range t.templates {
		if len(tpl.segs) != len(segs) {
			continue
		}
		for i, s := range tpl.segs {
			if strings.HasPrefix(s, "{") {
				if segs[i] == "" {
					continue next
				}
			} else if s != segs[i] {
				continue next
			}
		}
		return tpl.text
	}
	return Other
}

// Method returns the request's method if it is a standard one, else "OTHER".
func Method(r *http.Request) string {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return r.Method
	case "":
		return http.MethodGet // net/http's meaning of an empty method
	}
	return "OTHER"
}
