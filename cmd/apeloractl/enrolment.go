package main

// Enrolment: approve it (a single-use join token, shown once) and revoke the pending token.

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/apelora/fabric/client"
)

var (
	approveCommand = &command{
		name: "approve", synopsis: "NAME [-cluster NAME] [-member-config ENTITY/NAME/KEY=VALUE ...]", names: 1,
		doc:      "approve enrolment: prints the join token ONCE and the\ncommand to run on the new server; -cluster chooses the\ncluster it joins (default: the record's cluster)",
		mutation: "approveEnrolment",
		flags: func(fs *flag.FlagSet) runner {
			var cfg multiFlag
			cluster := clusterFlag(fs)
			fs.Var(&cfg, "member-config", "ENTITY/NAME/KEY=VALUE, for example storage-pool/local/source=/dev/sdb; repeat")
			return func(c *cli, ctx context.Context, names []string) error {
				return c.approve(ctx, names[0], orNil(*cluster), cfg)
			}
		},
	}
	revokeCommand = &command{
		name: "revoke", synopsis: "NAME", doc: "revoke the pending join token", names: 1,
		mutation: "revokeJoinToken", run: (*cli).revoke,
	}
)

func (c *cli) approve(ctx context.Context, name string, cluster *string, cfg []string) error {
	in := client.ApproveEnrolmentInput{Name: name, Cluster: cluster}
	for _, e := range cfg {
		id, value, ok := strings.Cut(e, "=")
		parts := strings.Split(id, "/")
		if !ok || len(parts) != 3 {
			return usageError(fmt.Sprintf("-member-config %q: write ENTITY/NAME/KEY=VALUE", e))
		}
		in.MemberConfig = append(in.MemberConfig, client.MemberConfigInput{Entity: parts[0], Name: parts[1], Key: parts[2], Value: value})
	}
	return change(c, func(dryRun *bool, planHash *string) (*client.ApproveEnrolmentResponse, planView, error) {
		in.DryRun, in.PlanHash = dryRun, planHash
		r, err := client.ApproveEnrolment(ctx, c.gql, in)
		return r, r.GetApproveEnrolment().Plan, err
	}, func(r *client.ApproveEnrolmentResponse) error {
		a := r.ApproveEnrolment
		if c.json {
			return c.print(a, nil)
		}
		fmt.Fprintf(c.out, "approved the enrolment of %s; the join token expires %s\n\n", name, a.ExpiresAt.Local().Format(time.DateTime))
		fmt.Fprintf(c.out, "join token (shown only now; Apelora does not keep it):\n%s\n\n", str(a.JoinToken))
		fmt.Fprintf(c.out, "on the new server, run (replace ADDRESS by its own address) and paste the token when asked:\n%s\n", str(a.Command))
		return nil
	})
}

// clusterFlag is -cluster of approve, install and bulk install: the Incus cluster the
// machine joins (a name `apeloractl clusters` lists). Not given, the server chooses: the
// cluster the machine record names, or the cluster of APELORA_INCUS_* for one naming none.
func clusterFlag(fs *flag.FlagSet) *string {
	return fs.String("cluster", "", "the cluster it joins (a name 'apeloractl clusters' lists); default: the cluster its record names")
}

// orNil is a string flag as an optional input: nil (the server's default) when not given.
func orNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (c *cli) revoke(ctx context.Context, names []string) error {
	return change(c, func(dryRun *bool, planHash *string) (*client.RevokeJoinTokenResponse, planView, error) {
		r, err := client.RevokeJoinToken(ctx, c.gql, client.RevokeJoinTokenInput{Name: names[0], DryRun: dryRun, PlanHash: planHash})
		return r, r.GetRevokeJoinToken().Plan, err
	}, func(*client.RevokeJoinTokenResponse) error {
		fmt.Fprintf(c.out, "revoked the pending join token for %s\n", names[0])
		return nil
	})
}
