package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/testkit/incuslab"
	"github.com/apelora/fabric/testkit/producttest"
)

// approve -cluster chooses the cluster the machine joins: its dry run's plan names it (the
// fact "cluster of NAME"), and changes nothing; a cluster no one registered is the server's
// refusal (NOT_FOUND, naming the registered ones), a non-zero exit status.
func TestApproveChoosesTheCluster(t *testing.T) {
	lab := incuslab.Start(t, 1)
	rack2 := incuslab.StartWith(t, incuslab.Options{Members: 1, Identity: lab.Identity()})
	e := producttest.Start(t, producttest.WithIncus(lab.Config))
	ops := e.Identity("ops", identity.ManageInfrastructure)
	if r := e.RegisterCluster(ops, "rack2", rack2); len(r.Errors) > 0 {
		t.Fatalf("registering rack2: %v", r.Errors)
	}
	t.Setenv("APELORA_URL", e.Base)
	t.Setenv("APELORA_TOKEN", ops)
	do := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(t.Context(), args, &out)
		return out.String(), err
	}
	if out, err := do("register", "node-9"); err != nil {
		t.Fatalf("register: %v\n%s", err, out)
	}

	out, err := do("approve", "node-9", "-cluster", "rack2", "-dry-run")
	if err != nil || !strings.Contains(out, "read: cluster of node-9: rack2") || !strings.Contains(out, "-plan-hash sha256:") {
		t.Fatalf("approve -cluster rack2 -dry-run: %v\n%s", err, out)
	}
	if strings.Contains(out, "join token (shown only now") {
		t.Fatalf("a dry run issued a join token:\n%s", out)
	}
	if n := e.Scalar(`SELECT count(*) FROM machine_records WHERE name = 'node-9' AND cluster_id IS NOT NULL`); n != int64(0) {
		t.Fatalf("a dry run moved the machine record to a cluster (%v rows)", n)
	}
	// Without -cluster, the record's cluster (none yet: the environment's, "default").
	if out, err := do("approve", "node-9", "-dry-run"); err != nil || !strings.Contains(out, "read: cluster of node-9: default") {
		t.Fatalf("approve -dry-run without -cluster: %v\n%s", err, out)
	}

	out, err = do("approve", "node-9", "-cluster", "rack9", "-dry-run")
	if err == nil || exitStatus(err) == 0 || !strings.Contains(err.Error(), `no cluster named "rack9"`) || !strings.Contains(err.Error(), "rack2") {
		t.Fatalf("approve -cluster rack9 (unknown): %v (exit %d)\n%s", err, exitStatus(err), out)
	}
}
