package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apelora/fabric/domain/identity"
	"github.com/apelora/fabric/internal/app"
	"github.com/apelora/fabric/internal/apperr"
)

// identityCommand runs `apelora identity create|list|revoke` on the database directly, as
// the administrator of the server (app.LocalCaller), through the same rules and audited
// changes as the API.
func identityCommand(ctx context.Context, cfg app.Config, log *slog.Logger, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("identity: give a subcommand: create, list or revoke")
	}
	switch args[0] {
	case "create":
		return createIdentity(ctx, cfg, log, args[1:], stdout)
	case "list":
		if len(args) > 1 {
			return fmt.Errorf("unexpected arguments %q", strings.Join(args[1:], " "))
		}
		return withIdentities(ctx, cfg, log, func(svc *identity.Service, _ *app.Database) error {
			ids, err := svc.List(ctx)
			if err != nil {
				return err
			}
			printIdentities(stdout, ids, time.Now())
			return nil
		})
	case "revoke":
		if len(args) != 2 || strings.HasPrefix(args[1], "-") {
			return errors.New("usage: apelora identity revoke NAME")
		}
		name := args[1]
		return withIdentities(ctx, cfg, log, func(svc *identity.Service, db *app.Database) error {
			by := app.LocalCaller()
			var revoked *identity.Identity
			err := app.OnServer(ctx, db.Store, by, "revokeIdentity", map[string]any{"name": name}, func(ctx context.Context) error {
				var err error
				revoked, err = svc.Revoke(ctx, by, name)
				return err
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "revoked identity %q: its token is refused from now on, and its open websockets are being closed\n", revoked.Name)
			ids, err := svc.List(ctx)
			if err != nil {
				return err
			}
			for _, id := range ids {
				if id.Has(identity.ManageInfrastructure) && id.Active(time.Now()) {
					return nil
				}
			}
			fmt.Fprintln(stdout, "note: no active identity has manage-infrastructure now; create one with `apelora identity create`")
			return nil
		})
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("identity: unknown subcommand %q: use create, list or revoke", args[0])
	}
}

// withIdentities opens the database for one identity command. Errors for administrators
// are shown as their message alone.
func withIdentities(ctx context.Context, cfg app.Config, log *slog.Logger, fn func(*identity.Service, *app.Database) error) error {
	db, err := app.OpenDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()
	// A change on the server records its audit event like the API's: sealed with the key.
	if err := app.SealAudit(cfg, db.Store, log); err != nil {
		return err
	}
	if err := fn(&identity.Service{Store: db.Store}, db); err != nil {
		return errors.New(apperr.Text(err))
	}
	return nil
}

type permissionFlags []identity.Permission

func (p *permissionFlags) String() string { return fmt.Sprint(*p) }
func (p *permissionFlags) Set(s string) error {
	perm, err := identity.ParsePermission(s)
	if err != nil {
		return errors.New(apperr.Text(err))
	}
	*p = append(*p, perm)
	return nil
}

type grantFlags []identity.GrantText

func (g *grantFlags) String() string { return fmt.Sprint(*g) }
func (g *grantFlags) Set(s string) error {
	grant, err := identity.ParseGrant(s)
	if err != nil {
		return errors.New(apperr.Text(err))
	}
	*g = append(*g, grant)
	return nil
}

func createIdentity(ctx context.Context, cfg app.Config, log *slog.Logger, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("identity create", flag.ContinueOnError)
	name := fs.String("name", "", "the identity's name (lower-case letters, digits, '.', '_', '-')")
	var perms permissionFlags
	fs.Var(&perms, "permission", "a permission to grant in every cluster; repeat for several")
	var grants grantFlags
	fs.Var(&grants, "grant", "a permission to grant, in one cluster (manage-infrastructure@rack1, hardware.delete@rack1) or, without @, in every cluster; repeat for several")
	expires := fs.String("expires", "", "when it stops working: a duration such as 90d or 12h, or an RFC 3339 time (default: never)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", strings.Join(fs.Args(), " "))
	}
	in := identity.NewIdentity{Name: *name, Permissions: perms, Grants: grants}
	granted := make([]any, len(perms))
	for i, p := range perms {
		granted[i] = string(p)
	}
	params := map[string]any{"name": *name, "permissions": granted}
	if len(grants) > 0 {
		texts := make([]any, len(grants))
		for i, g := range grants {
			texts[i] = g.String()
		}
		params["grants"] = texts
	}
	if *expires != "" {
		in.ExpiresAt, in.ExpiresIn = identity.ExpiryFromFlag(*expires)
		params["expires"] = *expires
	}
	return withIdentities(ctx, cfg, log, func(svc *identity.Service, db *app.Database) error {
		by := app.LocalCaller()
		var id *identity.Identity
		var token string
		err := app.OnServer(ctx, db.Store, by, "createIdentity", params, func(ctx context.Context) error {
			var err error
			id, token, err = svc.Create(ctx, by, in)
			return err
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "created identity %q with %v", id.Name, append(permissionTexts(id.Permissions), identity.GrantsText(id.Grants)...))
		if id.ExpiresAt != nil {
			fmt.Fprintf(stdout, ", expiring %s", id.ExpiresAt.Local().Format(time.RFC3339))
		}
		fmt.Fprintln(stdout)
		fmt.Fprintln(stdout, "its bearer token, shown only now (Apelora keeps only a hash):")
		fmt.Fprintln(stdout, token)
		return nil
	})
}

func printIdentities(out io.Writer, ids []identity.Identity, now time.Time) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tPERMISSIONS\tSTATUS\tCREATED\tLAST USED\tEXPIRES")
	for _, id := range ids {
		perms := append(permissionTexts(id.Permissions), identity.GrantsText(id.Grants)...)
		status := "active"
		switch {
		case id.RevokedAt != nil:
			status = fmt.Sprintf("revoked %s by %s", stamp(id.RevokedAt), id.RevokedBy)
		case !id.Active(now):
			status = "expired"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", id.Name, strings.Join(perms, ","), status, stamp(&id.CreatedAt), stamp(id.LastUsedAt), stamp(id.ExpiresAt))
	}
	w.Flush()
}

func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}

func permissionTexts(ps []identity.Permission) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p)
	}
	return out
}
