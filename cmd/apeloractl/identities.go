package main

// Identities: who the token is, every identity, creating one (its bearer token shown
// once) and revoking one.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/apelora/fabric/client"
	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/apperr"
)

var (
	whoamiCommand         = &command{name: "whoami", doc: "the identity the token belongs to", run: (*cli).whoami}
	identitiesCommand     = &command{name: "identities", doc: "every identity: permissions, status, last use, expiry", run: (*cli).identities}
	createIdentityCommand = &command{
		name: "create-identity", synopsis: "NAME -permission PERM [-grant PERM@CLUSTER ...] [-expires 90d|RFC3339]", names: 1,
		doc:      "create an identity: prints its bearer token ONCE",
		mutation: "createIdentity",
		flags: func(fs *flag.FlagSet) runner {
			var perms, grants multiFlag
			fs.Var(&perms, "permission", "view-infrastructure, manage-infrastructure or hardware.delete, in every cluster; repeat for several")
			fs.Var(&grants, "grant", "a permission in one cluster only, PERM@CLUSTER (manage-infrastructure@rack1; a cluster 'apeloractl clusters' lists); repeat for several")
			expires := fs.String("expires", "", "when it stops working: a duration such as 90d or 12h, or an RFC 3339 time (default: never)")
			return func(c *cli, ctx context.Context, names []string) error {
				return c.createIdentity(ctx, names[0], perms, grants, *expires)
			}
		},
	}
	revokeIdentityCommand = &command{
		name: "revoke-identity", synopsis: "NAME", doc: "revoke an identity at once (its websockets close too)", names: 1,
		mutation: "revokeIdentity", run: (*cli).revokeIdentity,
	}
)

func (c *cli) whoami(ctx context.Context, _ []string) error {
	r, err := client.Viewer(ctx, c.gql)
	if err != nil {
		return err
	}
	return c.print(r.Viewer, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "%s\t%v\n", r.Viewer.Name, r.Viewer.Permissions)
	})
}

func (c *cli) identities(ctx context.Context, _ []string) error {
	r, err := client.Identities(ctx, c.gql)
	if err != nil {
		return err
	}
	// The fragment's fields, not genqlient's wrappers (which marshal to {}).
	ids := make([]client.IdentityFields, len(r.Identities))
	for i := range r.Identities {
		ids[i] = r.Identities[i].IdentityFields
	}
	return c.print(ids, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "NAME\tPERMISSIONS\tSTATUS\tCREATED\tLAST USED\tEXPIRES")
		for _, id := range ids {
			perms := make([]string, len(id.Permissions))
			for i, p := range id.Permissions {
				perms[i] = permissionWord(p)
			}
			for _, g := range id.Grants {
				perms = append(perms, permissionWord(g.Permission)+"@"+g.Cluster)
			}
			status := "active"
			switch {
			case id.RevokedAt != nil:
				status = fmt.Sprintf("revoked %s by %s", when(id.RevokedAt), str(id.RevokedBy))
			case !id.Active:
				status = "expired"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", id.Name, strings.Join(perms, ","), status, when(&id.CreatedAt), when(id.LastUsedAt), when(id.ExpiresAt))
		}
	})
}

func (c *cli) createIdentity(ctx context.Context, name string, perms, grants []string, expires string) error {
	in := client.CreateIdentityInput{Name: name, Permissions: []client.Permission{}}
	for _, p := range perms {
		perm, err := identity.ParsePermission(p)
		if err != nil {
			return errors.New(apperr.Text(err))
		}
		in.Permissions = append(in.Permissions, permissionEnum(perm))
	}
	for _, g := range grants {
		grant, err := identity.ParseGrant(g)
		if err != nil {
			return errors.New(apperr.Text(err))
		}
		if grant.Cluster == "" {
			return fmt.Errorf("-grant %s names no cluster: write PERM@CLUSTER, or give a permission in every cluster with -permission", g)
		}
		in.Grants = append(in.Grants, client.ClusterGrantInput{Permission: permissionEnum(grant.Permission), Cluster: grant.Cluster})
	}
	if expires != "" {
		at, dur := identity.ExpiryFromFlag(expires)
		in.ExpiresAt = at
		if dur != "" {
			in.ExpiresIn = &dur
		}
	}
	return change(c, func(dryRun *bool, planHash *string) (*client.CreateIdentityResponse, planView, error) {
		in.DryRun, in.PlanHash = dryRun, planHash
		r, err := client.CreateIdentity(ctx, c.gql, in)
		return r, r.GetCreateIdentity().Plan, err
	}, func(r *client.CreateIdentityResponse) error {
		p := r.CreateIdentity
		if c.json {
			return c.print(map[string]any{"identity": p.Identity.IdentityFields, "token": p.Token}, nil)
		}
		fmt.Fprintf(c.out, "created identity %s", p.Identity.Name)
		if p.Identity.ExpiresAt != nil {
			fmt.Fprintf(c.out, ", expiring %s", when(p.Identity.ExpiresAt))
		}
		fmt.Fprintf(c.out, "\nits bearer token, shown only now (Apelora keeps only a hash):\n%s\n", str(p.Token))
		return nil
	})
}

func (c *cli) revokeIdentity(ctx context.Context, names []string) error {
	return change(c, func(dryRun *bool, planHash *string) (*client.RevokeIdentityResponse, planView, error) {
		r, err := client.RevokeIdentity(ctx, c.gql, client.RevokeIdentityInput{Name: names[0], DryRun: dryRun, PlanHash: planHash})
		return r, r.GetRevokeIdentity().Plan, err
	}, func(r *client.RevokeIdentityResponse) error {
		if c.json {
			return c.print(map[string]any{"identity": r.RevokeIdentity.Identity.IdentityFields}, nil)
		}
		fmt.Fprintf(c.out, "revoked identity %s: its token is refused from now on, and its open websockets are closed\n", r.RevokeIdentity.Identity.Name)
		return nil
	})
}

// permissionEnum is the API's name of a permission (manage-infrastructure →
// MANAGE_INFRASTRUCTURE); permissionWord is the reverse.
func permissionEnum(p identity.Permission) client.Permission {
	return client.Permission(strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(string(p))))
}

func permissionWord(p client.Permission) string {
	for _, perm := range identity.AllPermissions {
		if permissionEnum(perm) == p {
			return string(perm)
		}
	}
	return string(p)
}
