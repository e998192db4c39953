package main

// Enrolment: approve it (a single-use join token, shown once) and revoke the pending token.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/apelora/fabric/client"
)

func (c *cli) approve(ctx context.Context, args []string) error {
	const use = "apeloractl approve NAME [-member-config ENTITY/NAME/KEY=VALUE ...]"
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usageError(use)
	}
	name := args[0]
	fs := newFlags("approve")
	var cfg multiFlag
	fs.Var(&cfg, "member-config", "ENTITY/NAME/KEY=VALUE, for example storage-pool/local/source=/dev/sdb; repeat")
	if err := parseFlags(fs, args[1:], use); err != nil {
		return err
	}
	in := client.ApproveEnrolmentInput{Name: name}
	for _, e := range cfg {
		id, value, ok := strings.Cut(e, "=")
		parts := strings.Split(id, "/")
		if !ok || len(parts) != 3 {
			return usageError(fmt.Sprintf("-member-config %q: write ENTITY/NAME/KEY=VALUE", e))
		}
		in.MemberConfig = append(in.MemberConfig, client.MemberConfigInput{Entity: parts[0], Name: parts[1], Key: parts[2], Value: value})
	}
	in.DryRun = c.dry()
	in.PlanHash = c.planHash
	r, err := client.ApproveEnrolment(ctx, c.gql, in)
	if err != nil || c.dryRun {
		return c.planOr(err, r.GetApproveEnrolment().Plan)
	}
	a := r.ApproveEnrolment
	if c.json {
		return c.print(a, nil)
	}
	fmt.Fprintf(c.out, "approved the enrolment of %s; the join token expires %s\n\n", name, a.ExpiresAt.Local().Format(time.DateTime))
	fmt.Fprintf(c.out, "join token (shown only now; Apelora does not keep it):\n%s\n\n", str(a.JoinToken))
	fmt.Fprintf(c.out, "on the new server, run (replace ADDRESS by its own address) and paste the token when asked:\n%s\n", str(a.Command))
	return nil
}

func (c *cli) revoke(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return usageError("apeloractl revoke NAME")
	}
	r, err := client.RevokeJoinToken(ctx, c.gql, client.RevokeJoinTokenInput{Name: args[0], DryRun: c.dry(), PlanHash: c.planHash})
	if err != nil || c.dryRun {
		return c.planOr(err, r.GetRevokeJoinToken().Plan)
	}
	fmt.Fprintf(c.out, "revoked the pending join token for %s\n", args[0])
	return nil
}
