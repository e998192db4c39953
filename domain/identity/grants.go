package identity

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/apelora/fabric/internal/apperr"
)

// ClusterGrant is a permission held in one Incus cluster only (issue 27): a row of
// identity_grants. An identity's Permissions are its unscoped grants, which hold in every
// cluster and for what is about no cluster (registering clusters, identities, a machine
// record enrolled in none).
type ClusterGrant struct {
	Permission Permission
	// Cluster is the cluster's record id; ClusterName its name (for messages and clients).
	Cluster     int64
	ClusterName string
}

// String is the grant as an administrator writes it: permission@cluster.
func (g ClusterGrant) String() string { return string(g.Permission) + "@" + g.ClusterName }

// GrantText is a grant as an administrator writes it, before its cluster is looked up:
// a permission, unscoped ("manage-infrastructure"), or in one cluster
// ("manage-infrastructure@rack1").
type GrantText struct {
	Permission Permission
	// Cluster is the cluster's name; "" for an unscoped grant.
	Cluster string
}

func (g GrantText) String() string {
	if g.Cluster == "" {
		return string(g.Permission)
	}
	return string(g.Permission) + "@" + g.Cluster
}

// ParseGrant reads "permission" or "permission@cluster". view-infrastructure@cluster
// scopes the identity's reads to its clusters (ReadScope).
func ParseGrant(s string) (GrantText, error) {
	p, cluster, scoped := strings.Cut(strings.TrimSpace(s), "@")
	perm, err := ParsePermission(p)
	if err != nil {
		return GrantText{}, err
	}
	if !scoped {
		return GrantText{Permission: perm}, nil
	}
	cluster = strings.TrimSpace(cluster)
	if !clusterName.MatchString(cluster) {
		return GrantText{}, apperr.Invalid("grants", "%s names no cluster: write permission@cluster, the cluster as the clusters query lists it (for example manage-infrastructure@rack1)", apperr.Quote(s))
	}
	return GrantText{Permission: perm, Cluster: cluster}, nil
}

// clusterName is the form of a cluster's name (as migrations/0040_clusters.sql checks it).
var clusterName = regexp.MustCompile(`^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$`)

// SplitGrants separates unscoped permissions from grants in one cluster.
func SplitGrants(in []GrantText) (unscoped []Permission, scoped []GrantText) {
	for _, g := range in {
		if g.Cluster == "" {
			unscoped = append(unscoped, g.Permission)
		} else {
			scoped = append(scoped, g)
		}
	}
	return unscoped, scoped
}

// checkGrants refuses scoped grants that grant nothing usable and returns them sorted
// without repeats: hardware.delete in a cluster needs manage-infrastructure there (or
// unscoped).
func checkGrants(unscoped []Permission, in []GrantText) ([]GrantText, error) {
	out := slices.Clone(in)
	slices.SortFunc(out, func(a, b GrantText) int { return strings.Compare(a.String(), b.String()) })
	out = slices.Compact(out)
	for _, g := range out {
		if !clusterName.MatchString(g.Cluster) {
			return nil, apperr.Invalid("grants", "%s names no cluster: give a cluster's name as the clusters query lists it", apperr.Quote(g.String()))
		}
		if g.Permission == HardwareDelete && !slices.Contains(unscoped, ManageInfrastructure) &&
			!slices.Contains(out, GrantText{Permission: ManageInfrastructure, Cluster: g.Cluster}) {
			return nil, apperr.Invalid("grants", "hardware.delete@%s only widens manage-infrastructure there: add manage-infrastructure@%s, or leave it out", g.Cluster, g.Cluster)
		}
	}
	return out, nil
}

// Scoped returns the grants in one cluster the identity holds at now: none while an SSO
// identity's groups are unconfirmed (Granted).
func (i *Identity) Scoped(now time.Time) []ClusterGrant {
	if i == nil || (i.SSO != nil && !i.SSO.Confirmed(now)) {
		return nil
	}
	return i.Grants
}

// scopedHolds reports whether grants give p in cluster.
func scopedHolds(grants []ClusterGrant, p Permission, cluster int64) bool {
	return slices.ContainsFunc(grants, func(g ClusterGrant) bool { return g.Permission == p && g.Cluster == cluster })
}

// HasIn reports whether the identity holds p in cluster now: unscoped (Has), or granted
// there. hardware.delete in a cluster needs manage-infrastructure there too.
func (i *Identity) HasIn(p Permission, cluster int64) bool {
	if i.Has(p) {
		return true
	}
	now := time.Now()
	unscoped, scoped := i.Granted(now), i.Scoped(now)
	in := func(p Permission) bool { return holds(unscoped, p) || scopedHolds(scoped, p, cluster) }
	switch p {
	case HardwareDelete:
		return in(HardwareDelete) && in(ManageInfrastructure)
	case ViewInfrastructure:
		return i.ReadScope().Reads(cluster)
	}
	return in(p)
}

// Where is what a call acts on, for a permission's check: a cluster (ID and Name), or
// every cluster (ID 0: a call about no cluster, or a machine record enrolled in none),
// and Why in the administrator's words ("m1 is in rack2", "registerCluster acts on every
// cluster").
type Where struct {
	Cluster int64
	Name    string
	Why     string
}

// RequireIn returns a FORBIDDEN error when the identity does not hold p where the call
// acts, naming where it does hold it, or nil.
func (i *Identity) RequireIn(p Permission, w Where) error {
	if i == nil {
		return errNoBearer()
	}
	if w.Cluster == 0 {
		if i.Has(p) {
			return nil
		}
	} else if i.HasIn(p, w.Cluster) {
		return nil
	}
	var in []string
	for _, g := range i.Scoped(time.Now()) {
		if g.Permission == p && (p != HardwareDelete || i.HasIn(HardwareDelete, g.Cluster)) {
			in = append(in, g.ClusterName)
		}
	}
	if len(in) == 0 {
		// Nothing scoped either: the unscoped refusal (which also explains an SSO
		// identity's unconfirmed groups).
		if err := i.Require(p); err != nil {
			return err
		}
		return apperr.New(apperr.Forbidden, "identity %s lacks the %s permission here: %s", apperr.Quote(i.Name), p, w.Why)
	}
	slices.Sort(in)
	want := string(p)
	if w.Cluster != 0 {
		want += "@" + w.Name
	}
	return apperr.New(apperr.Forbidden, "you (identity %s) may %s %s only; %s: ask an administrator to grant %s",
		apperr.Quote(i.Name), verb(p), strings.Join(in, ", "), w.Why, want)
}

// verb is what a permission lets its holder do, in a refusal's words.
func verb(p Permission) string {
	switch p {
	case ManageInfrastructure:
		return "manage"
	case HardwareDelete:
		return "erase disks (hardware.delete) in"
	}
	return "use " + string(p) + " in"
}

// GrantsText lists grants as an administrator writes them, sorted.
func GrantsText(gs []ClusterGrant) []string {
	out := make([]string, len(gs))
	for k, g := range gs {
		out[k] = g.String()
	}
	slices.Sort(out)
	return out
}

// UnknownClusters is the warning for grants naming clusters that are not registered:
// they grant nothing (skipped) until a cluster of that name is registered.
func UnknownClusters(skipped []GrantText) string {
	names := make([]string, len(skipped))
	for k, g := range skipped {
		names[k] = g.String()
	}
	return fmt.Sprintf("skipped grants naming no registered cluster: %s (register the cluster, or correct the name)", strings.Join(names, ", "))
}
