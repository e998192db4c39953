package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/apelora/fabric/domain/auditlog"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/app"
	"github.com/apelora/fabric/testkit/producttest"
)

const (
	auditCheckpointQuery = `{ auditCheckpoint { treeSize rootHash signed at verifierKey } }`
	auditProofQuery      = `query($id: ID!) { auditProof(id: $id) { eventId leafIndex leafHash hashes checkpoint { treeSize rootHash signed verifierKey } } }`
)

// The API's checkpoint is signed every interval once the trail grew, and every event it
// covers has a proof a client checks with the checkpoint's public key alone; the signing
// key is in no answer and no log line.
func TestAuditCheckpointAndProofsOverTheAPI(t *testing.T) {
	parallel(t)
	state := t.TempDir()
	e := producttest.Start(t, func(c *app.Config) { c.StateDir, c.AuditCheckpointInterval = state, time.Second })
	admin := e.Identity("admin", identity.ManageInfrastructure)
	viewer := e.Identity("viewer", identity.ViewInfrastructure)
	for i := range 6 {
		e.MustGQL(admin, `mutation($n: String!) { createIdentity(input: {name: $n, permissions: [VIEW_INFRASTRUCTURE]}) { token } }`,
			map[string]any{"n": fmt.Sprintf("reader-%d", i)})
	}
	events := e.Count("audit_events")
	var answers strings.Builder
	var cp map[string]any
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r := e.GQL(viewer, auditCheckpointQuery, nil)
		answers.WriteString(fmt.Sprint(r.Data, r.Errors))
		if len(r.Errors) > 0 {
			t.Fatalf("auditCheckpoint: %+v", r.Errors)
		}
		cp, _ = r.Data["auditCheckpoint"].(map[string]any)
		if cp != nil && int64(cp["treeSize"].(float64)) >= events {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint of %d events within 20 s: %v", events, cp)
		}
	}
	v, err := auditlog.ParseVerifierKey(cp["verifierKey"].(string))
	if err != nil {
		t.Fatal(err)
	}
	tree, err := auditlog.ParseCheckpoint([]byte(cp["signed"].(string)), v)
	if err != nil || tree.N != int64(cp["treeSize"].(float64)) || tree.Hash.String() != cp["rootHash"] {
		t.Fatalf("the checkpoint's signed text says %+v (%v); the fields say %v", tree, err, cp)
	}
	rows, err := e.DB.Store.Pool().Query(t.Context(), `SELECT id, leaf_index FROM audit_events WHERE leaf_index < $1 ORDER BY id`, tree.N)
	if err != nil {
		t.Fatal(err)
	}
	type leaf struct{ id, index int64 }
	var leaves []leaf
	for rows.Next() {
		var l leaf
		rows.Scan(&l.id, &l.index)
		leaves = append(leaves, l)
	}
	if rows.Err() != nil || int64(len(leaves)) != tree.N {
		t.Fatalf("%d events under the checkpoint of %d (%v)", len(leaves), tree.N, rows.Err())
	}
	for _, l := range leaves {
		r := e.GQL(viewer, auditProofQuery, map[string]any{"id": fmt.Sprint(l.id)})
		answers.WriteString(fmt.Sprint(r.Data, r.Errors))
		if len(r.Errors) > 0 {
			t.Fatalf("auditProof(%d): %+v", l.id, r.Errors)
		}
		p := r.Data["auditProof"].(map[string]any)
		var hashes []string
		for _, h := range p["hashes"].([]any) {
			hashes = append(hashes, h.(string))
		}
		proof := auditlog.Proof{EventID: l.id, LeafIndex: int64(p["leafIndex"].(float64))}
		if proof.Hashes, err = auditlog.ParseProof(hashes); err != nil {
			t.Fatal(err)
		}
		if proof.LeafHash, err = tlog.ParseHash(p["leafHash"].(string)); err != nil {
			t.Fatal(err)
		}
		pc := p["checkpoint"].(map[string]any)
		if proof.Checkpoint.Size, proof.Checkpoint.Root, err = checkpointTree(pc, v); err != nil {
			t.Fatal(err)
		}
		if proof.LeafIndex != l.index || proof.Check() != nil {
			t.Fatalf("event %d (leaf %d): the proof %v does not check: %v", l.id, l.index, p, proof.Check())
		}
	}
	for id, code := range map[string]string{"999999": "NOT_FOUND", "x": "INVALID_INPUT"} {
		if r := e.GQL(viewer, auditProofQuery, map[string]any{"id": id}); r.Code() != code {
			t.Errorf("auditProof(%s): %+v, want %s", id, r.Errors, code)
		}
	}
	eraser := e.UncheckedIdentity("eraser", identity.HardwareDelete)
	for token, code := range map[string]string{"": "UNAUTHENTICATED", eraser: "FORBIDDEN"} {
		for _, r := range []*producttest.Response{e.GQL(token, auditCheckpointQuery, nil), e.GQL(token, auditProofQuery, map[string]any{"id": "1"})} {
			if r.Code() != code || r.Data != nil {
				t.Errorf("the audit log's reads without view-infrastructure (token %q): %+v, want %s and no data", token, r, code)
			}
		}
	}
	raw, err := os.ReadFile(filepath.Join(state, auditlog.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	skey := strings.TrimSpace(string(raw))
	secret := strings.SplitN(skey, "+", 5)[4]
	if strings.Contains(answers.String(), secret) || strings.Contains(e.Logs.String(), secret) {
		t.Fatal("the audit signing key is in an API answer or the log")
	}
}

func checkpointTree(c map[string]any, v note.Verifier) (int64, tlog.Hash, error) {
	tree, err := auditlog.ParseCheckpoint([]byte(c["signed"].(string)), v)
	return tree.N, tree.Hash, err
}
