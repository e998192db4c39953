// Command configdoc writes docs/configuration.md from the variable tables in app (Variables,
// WorkerVariables and the tables they are made of), so the document lists exactly what the
// server and the worker read, with the defaults they apply and the words `apelora env`
// prints. `go generate ./...` runs it from the module root; scripts/test.sh fails when the
// committed file is stale, and so does this package's test.
//
// The prose around the tables is configuration.md.tmpl; a variable's meaning is edited where
// the variable is read (internal/app/*.go), never in the document.
package main

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/template"

	"github.com/apelora/fabric/internal/app"
)

// docFile is the document it writes, from the module root.
const docFile = "docs/configuration.md"

//go:embed configuration.md.tmpl
var tmpl string

func main() {
	doc, err := render()
	if err == nil {
		err = os.WriteFile(docFile, doc, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "internal/app/configdoc:", err)
		os.Exit(1)
	}
}

// row is one variable in a table.
type row struct {
	Name, Default, Meaning string
	Worker                 bool // apelora-worker reads it too
}

// group is one table: a part of the configuration.
type group struct {
	Title string
	Rows  []row
}

// see are links from a variable to the page that says more; a name here that no table
// lists fails the generator, and the links test (docs_test.go) checks the targets.
var see = map[string]string{
	"APELORA_LISTEN":                        "[/healthz and /readyz](operations/monitoring.md#health-endpoints)",
	"APELORA_WS_SOCKETS_PER_IDENTITY":       "[Limits](security.md#limits)",
	"APELORA_WS_SUBSCRIPTIONS_PER_IDENTITY": "[Limits](security.md#limits)",
	"APELORA_TRUSTED_PROXIES":               "[High availability](operations/ha.md#high-availability)",
	"APELORA_CONSOLE_SESSION_TTL":           "[Console sessions](security.md#console-sessions)",
	"APELORA_REQUEST_TIMEOUT":               "[Waits](operations/README.md#waits)",
	"APELORA_LEADER_LEASE":                  "[High availability](operations/ha.md#high-availability)",
	"APELORA_DRIFT_INTERVAL":                "[Drift](machines.md#drift)",
	"APELORA_FLEET_REFRESH_INTERVAL":        "[The fleet stream](api.md#the-fleet-stream)",
	"APELORA_STEP_CONCURRENCY":              "[Bulk steps](api.md#bulk-steps)",
	"APELORA_INCUS_URL":                     "[Reaching Incus](operations/README.md#reaching-incus)",
	"APELORA_OIDC_ISSUER":                   "[Single sign-on](security.md#single-sign-on)",
	"APELORA_OIDC_RECHECK_INTERVAL":         "[Single sign-on](security.md#single-sign-on)",
	"APELORA_AUDIT_KEY_FILE":                "[The audit log](security.md#the-audit-log)",
	"APELORA_AUDIT_SYSLOG_ADDR":             "[Export to a SIEM](security.md#export-to-a-siem)",
	"APELORA_METRICS_LISTEN":                "[Monitoring](operations/monitoring.md)",
	"APELORA_FENCE_OFFLINE_AFTER":           "[The fencing worker](operations/fencing.md#the-fencing-worker)",
	"APELORA_ROLLING_ONLINE_TIMEOUT":        "[Rolling reboots](operations/maintenance.md#rolling-reboots)",
}

// groups splits the tables into the parts of the document: Variables is the server's own
// settings followed by the audit log's, the export's, the metrics' and single sign-on's
// tables; Incus and MAAS are the server's by prefix.
func groups() ([]group, error) {
	audit, export, metrics, sso := app.AuditVariables(), app.AuditExportVariables(), app.MetricsVariables(), app.SSOVariables()
	elsewhere := map[string]bool{}
	for _, v := range slices.Concat(audit, export, metrics, sso) {
		elsewhere[v.Name] = true
	}
	var server, incus, maas []app.Variable
	for _, v := range app.Variables() {
		switch {
		case elsewhere[v.Name]:
		case strings.HasPrefix(v.Name, "APELORA_INCUS_"):
			incus = append(incus, v)
		case strings.HasPrefix(v.Name, "APELORA_MAAS_"):
			maas = append(maas, v)
		default:
			server = append(server, v)
		}
	}
	rows := func(vs []app.Variable, worker bool) []row {
		var out []row
		for _, v := range vs {
			def := v.Default
			if v.Name == "APELORA_STATE_DIR" {
				def = app.StateDirDefault // Variables shows the folder of whoever asks
			}
			out = append(out, row{Name: v.Name, Default: def, Meaning: v.Meaning, Worker: worker || app.WorkerReads(v.Name)})
		}
		return out
	}
	gs := []group{
		{"The server", rows(server, false)},
		{"Incus", rows(incus, false)},
		{"MAAS", rows(maas, false)},
		{"Single sign-on", rows(sso, false)},
		{"The audit log", rows(audit, false)},
		{"Audit export to a SIEM", rows(export, false)},
		{"Metrics", rows(metrics, false)},
		{"apelora-worker", rows(app.WorkerVariables(), true)},
	}
	listed := map[string]bool{}
	for _, g := range gs {
		for _, r := range g.Rows {
			if listed[r.Name] {
				return nil, fmt.Errorf("%s is in two tables", r.Name)
			}
			listed[r.Name] = true
		}
	}
	for name := range see {
		if !listed[name] {
			return nil, fmt.Errorf("a link is kept for %s, which no table lists", name)
		}
	}
	return gs, nil
}

// cell writes text for a table cell: no line breaks, no bare pipes.
func cell(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// render returns the document.
func render() ([]byte, error) {
	gs, err := groups()
	if err != nil {
		return nil, err
	}
	rendered := map[string]int{}
	t, err := template.New("configuration.md").Funcs(template.FuncMap{
		"table": func(title string) (string, error) {
			for _, g := range gs {
				if g.Title != title {
					continue
				}
				rendered[title]++
				var b strings.Builder
				b.WriteString("| variable | default | meaning | worker |\n|---|---|---|---|\n")
				for _, r := range g.Rows {
					meaning := cell(r.Meaning)
					if l := see[r.Name]; l != "" {
						meaning += ". See " + l
					}
					worker := ""
					if r.Worker {
						worker = "reads it"
					}
					fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.Name, cell(r.Default), meaning, worker)
				}
				return b.String(), nil
			}
			return "", fmt.Errorf("no table %q", title)
		},
	}).Parse(tmpl)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, nil); err != nil {
		return nil, err
	}
	// Every table is in the document once.
	for _, g := range gs {
		if n := rendered[g.Title]; n != 1 {
			return nil, fmt.Errorf("the template shows the table %q %d times: show each once", g.Title, n)
		}
	}
	return b.Bytes(), nil
}
