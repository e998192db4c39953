package resolvers

import (
	"strconv"

	"github.com/apelora/fabric/domain/auditlog"
	"github.com/apelora/fabric/graph/model"
)

func mapAuditCheckpoint(c *auditlog.Checkpoint, verifierKey string) *model.AuditCheckpoint {
	return &model.AuditCheckpoint{TreeSize: int(c.Size), RootHash: c.Root.String(), Signed: c.Signed, At: c.At, VerifierKey: verifierKey}
}

func mapAuditProof(p *auditlog.Proof, verifierKey string) *model.AuditProof {
	out := &model.AuditProof{EventID: strconv.FormatInt(p.EventID, 10), LeafIndex: int(p.LeafIndex), LeafHash: p.LeafHash.String(),
		Hashes: make([]string, len(p.Hashes)), Checkpoint: mapAuditCheckpoint(&p.Checkpoint, verifierKey)}
	for i, h := range p.Hashes {
		out.Hashes[i] = h.String()
	}
	return out
}

func mapAuditTrail(st auditlog.Status) *model.AuditTrail {
	out := &model.AuditTrail{Verifies: st.Verified}
	if !st.CheckedAt.IsZero() {
		at := st.CheckedAt
		out.CheckedAt = &at
	}
	if !st.Verified {
		since, problem := st.Since, st.Problem
		out.Since, out.Problem = &since, &problem
	}
	return out
}
