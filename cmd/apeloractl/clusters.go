package main

// Incus clusters: the list, registering one and removing one.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/apelora/fabric/client"
)

var (
	clustersCommand = &command{
		name: "clusters", doc: "the Incus clusters Apelora manages, with their members",
		run: (*cli).clusters,
	}
	registerClusterCommand = &command{
		name: "register-cluster", synopsis: "-name NAME -url URL -certificate FILE",
		doc:      "register an Incus cluster: its plan connects once to\nthe member at URL, pinned to the certificate in FILE",
		mutation: "registerCluster",
		flags: func(fs *flag.FlagSet) runner {
			name := fs.String("name", "", "the cluster's name")
			url := fs.String("url", "", "https://host:8443 of one member")
			cert := fs.String("certificate", "", "the cluster certificate's PEM file ($INCUS_DIR/cluster.crt of a member)")
			return func(c *cli, ctx context.Context, _ []string) error {
				if *name == "" || *url == "" || *cert == "" {
					return usageError("register-cluster needs -name, -url and -certificate: " + "-name NAME -url URL -certificate FILE")
				}
				pem, err := os.ReadFile(*cert)
				if err != nil {
					return fmt.Errorf("read the cluster certificate: %w", err)
				}
				return c.registerCluster(ctx, client.RegisterClusterInput{Name: *name, Url: *url, ClusterCertificate: string(pem)})
			}
		},
	}
	removeClusterCommand = &command{
		name: "remove-cluster", synopsis: "NAME", names: 1,
		doc:      "forget an Incus cluster nothing names any more",
		mutation: "removeCluster", run: (*cli).removeCluster,
	}
)

func (c *cli) clusters(ctx context.Context, _ []string) error {
	r, err := client.Clusters(ctx, c.gql)
	if err != nil {
		return err
	}
	return c.print(r.Clusters, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "CLUSTER\tMEMBERS\tRECORDS\tTHROUGH\tFINGERPRINT")
		for _, cl := range r.Clusters {
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", cl.Name, clusterMembers(&cl.ClusterFields), cl.MachineRecords, orDash(cl.Through), orDash(&cl.CertificateFingerprint))
		}
	})
}

// clusterMembers is a cluster's members with their roles, or why they are unknown.
func clusterMembers(cl *client.ClusterFields) string {
	if cl.Members == nil {
		return "unknown: " + cl.Source.Message
	}
	var out []string
	for _, m := range cl.Members {
		out = append(out, fmt.Sprintf("%s(%s)", m.Name, strings.Join(m.Roles, "+")))
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

func orDash(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}

func (c *cli) registerCluster(ctx context.Context, in client.RegisterClusterInput) error {
	return change(c, func(dryRun *bool, planHash *string) (*client.RegisterClusterResponse, planView, error) {
		in.DryRun, in.PlanHash = dryRun, planHash
		r, err := client.RegisterCluster(ctx, c.gql, in)
		return r, r.GetRegisterCluster().Plan, err
	}, func(r *client.RegisterClusterResponse) error {
		if c.json {
			return c.print(r.RegisterCluster, nil)
		}
		cl := r.RegisterCluster.Cluster
		if cl == nil {
			return fmt.Errorf("the server answered without the cluster")
		}
		fmt.Fprintf(c.out, "registered cluster %s (certificate %s): %s\n", cl.Name, cl.CertificateFingerprint, clusterMembers(&cl.ClusterFields))
		return nil
	})
}

func (c *cli) removeCluster(ctx context.Context, names []string) error {
	return change(c, func(dryRun *bool, planHash *string) (*client.RemoveClusterResponse, planView, error) {
		r, err := client.RemoveCluster(ctx, c.gql, client.RemoveClusterInput{Name: names[0], DryRun: dryRun, PlanHash: planHash})
		return r, r.GetRemoveCluster().Plan, err
	}, func(r *client.RemoveClusterResponse) error {
		if c.json {
			return c.print(r.RemoveCluster, nil)
		}
		fmt.Fprintf(c.out, "removed cluster %s\n", names[0])
		return nil
	})
}
