package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// clusters lists the clusters with their members; register-cluster plans (-dry-run) and
// registers a second real lab; remove-cluster forgets it; a bad URL is the server's refusal.
func TestClusterCommands(t *testing.T) {
	lab := incuslab.Start(t, 1)
	rack2 := incuslab.StartWith(t, incuslab.Options{Members: 2, Identity: lab.Identity()})
	e := producttest.Start(t, producttest.WithIncus(lab.Config))
	t.Setenv("APELORA_URL", e.Base)
	t.Setenv("APELORA_TOKEN", e.Identity("ops", identity.ManageInfrastructure))
	do := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(t.Context(), args, &out)
		return out.String(), err
	}
	cert := filepath.Join(t.TempDir(), "cluster.crt")
	if err := os.WriteFile(cert, []byte(rack2.ClusterCertificatePEM()), 0o644); err != nil {
		t.Fatal(err)
	}

	if out, err := do("clusters"); err != nil || !strings.Contains(out, "default") || strings.Contains(out, "rack2") || !strings.Contains(out, "m1(") {
		t.Fatalf("clusters: %v\n%s", err, out)
	}
	out, err := do("register-cluster", "-name", "rack2", "-url", rack2.URL, "-certificate", cert, "-dry-run")
	if err != nil || !strings.Contains(out, "member m1") || !strings.Contains(out, "member m2") || !strings.Contains(out, "INSERT") {
		t.Fatalf("register-cluster -dry-run: %v\n%s", err, out)
	}
	if n := e.Scalar(`SELECT count(*) FROM clusters`); n != int64(1) {
		t.Fatalf("a dry run registered a cluster (%v clusters)", n)
	}
	if out, err := do("register-cluster", "-name", "rack2", "-url", rack2.URL, "-certificate", cert); err != nil ||
		!strings.Contains(out, "registered cluster rack2") || !strings.Contains(out, "m1(") || !strings.Contains(out, "m2(") {
		t.Fatalf("register-cluster: %v\n%s", err, out)
	}
	if out, err := do("clusters"); err != nil || !strings.Contains(out, "default") || !strings.Contains(out, "rack2") {
		t.Fatalf("clusters after registering rack2: %v\n%s", err, out)
	}
	bad := strings.Replace(rack2.URL, "https://", "http://", 1)
	if out, err := do("register-cluster", "-name", "rack3", "-url", bad, "-certificate", cert); err == nil || !strings.Contains(err.Error(), "HTTPS") {
		t.Fatalf("register-cluster with an http URL: %v\n%s", err, out)
	}
	if _, err := do("register-cluster", "-name", "rack3"); err == nil || !strings.HasPrefix(err.Error(), "usage: ") {
		t.Fatalf("register-cluster without -url: %v", err)
	}
	if out, err := do("remove-cluster", "rack2"); err != nil || !strings.Contains(out, "removed cluster rack2") {
		t.Fatalf("remove-cluster: %v\n%s", err, out)
	}
	if out, err := do("clusters"); err != nil || strings.Contains(out, "rack2") {
		t.Fatalf("clusters after removing rack2: %v\n%s", err, out)
	}
}
