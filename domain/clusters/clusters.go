// Package clusters is the Incus clusters Apelora manages behind one MAAS region (issue 27):
// each a record, registered by an audited step (registerCluster) or adopted at start from
// APELORA_INCUS_* (the environment's cluster), reached through any of its members with the
// one client identity every cluster trusts.
//
// It holds what every other package needs to be about one cluster among several:
//
//   - Cluster and MemberKey: a fact about a member is keyed (cluster, member); member names
//     are unique within a cluster only, machine names across Apelora;
//   - Resolve: the one rule that names the cluster a call is about;
//   - Ports[T]: how a service finds its port (its single-cluster interface) for a cluster;
//   - Registry: the clusters as this process knows them, refreshed by NOTIFY clusters;
//   - Service: register, remove and adopt, each an audited change, and RemoveRefusal.
//
// The package imports domain/machines for the member-name rule, which cluster names follow:
// machines must therefore never import it (its per-cluster lookup is declared there with
// the same method, which Ports[T]'s implementations satisfy).
package clusters

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apelora/fabric/internal/apperr"
)

// Cluster is a registered (or adopted) Incus cluster, as its record says.
type Cluster struct {
	// ID is the record's id: what every member table's cluster_id holds.
	ID   int64
	Name string
	// SeedURLs are the member URLs Apelora starts from: the registration URL (or
	// APELORA_INCUS_URL's list) and the member URLs the registration read.
	SeedURLs []string
	// Socket is the local daemon's unix socket, for the cluster adopted from
	// APELORA_INCUS_SOCKET only.
	Socket string
	// CertificatePEM is the cluster certificate (every CERTIFICATE block is pinned), and
	// Fingerprint the SHA-256 of its first block (lower-case hex). Both empty for the
	// placeholder, and for a socket cluster whose certificate could not be read yet.
	CertificatePEM string
	Fingerprint    string
	// FromEnvironment: carried over from APELORA_INCUS_* (at most one cluster). Adopted is
	// false only for the placeholder an upgraded database holds until a start adopts it.
	FromEnvironment bool
	Adopted         bool
	RegisteredBy    string
	RegisteredAt    time.Time
}

// Fact is what a plan that depends on the cluster's record reads (plan.Read): its
// connection and identity, never a clock.
func (c Cluster) Fact() string {
	if c.ID == 0 {
		return "none"
	}
	return fmt.Sprintf("id %d, fingerprint %s, seeds %s, socket %q, adopted %t", c.ID, orNone(c.Fingerprint), strings.Join(c.SeedURLs, " "), c.Socket, c.Adopted)
}

// Unadopted is the refusal of a call about the placeholder: Apelora has no connection to it
// until a start with APELORA_INCUS_* adopts it.
func (c Cluster) Unadopted() *apperr.Error {
	return apperr.New(apperr.Unavailable, "Incus cluster %s was carried over from the previous release and is not adopted yet: "+
		"set APELORA_INCUS_URL, APELORA_INCUS_SERVER_CERT (and the client identity) or APELORA_INCUS_SOCKET once, as before, and restart Apelora to adopt it", c.Name)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// MemberKey names a member across clusters: comparable, for map keys (no string building).
// Maps inside one cluster's computation stay keyed by the member's name.
type MemberKey struct {
	Cluster int64
	Name    string
}

// Ports finds a service's port for a cluster: its single-cluster interface T, made for the
// cluster's record (adapters/incus.As over the connection pool). An unknown or removed
// cluster is NOT_FOUND; the placeholder not adopted yet is UNAVAILABLE (Cluster.Unadopted).
type Ports[T any] interface {
	For(ctx context.Context, cluster int64) (T, error)
}

// PortsFunc is a function that is a Ports[T].
type PortsFunc[T any] func(ctx context.Context, cluster int64) (T, error)

// For calls f.
func (f PortsFunc[T]) For(ctx context.Context, cluster int64) (T, error) { return f(ctx, cluster) }

// MovedError is Resolve's answer when the call names another cluster than the machine's
// record: refused (FAILED_PRECONDITION), except by the steps that may move a REGISTERED
// machine to another cluster (approveEnrolment, installOperatingSystem), which look for it
// with errors.As and go on in To, saying in their plan that the record moves from From.
type MovedError struct {
	Machine  string
	From, To Cluster
}

func (e *MovedError) Error() string { return e.err().Message }

// Unwrap makes the refusal's code and message the error's (apperr.CodeOf, PublicMessage).
func (e *MovedError) Unwrap() error { return e.err() }

func (e *MovedError) err() *apperr.Error {
	return &apperr.Error{Code: apperr.FailedPrecondition, Field: "cluster", Message: fmt.Sprintf(
		"%s is a machine of cluster %s, not %s: leave cluster out, or name %s", e.Machine, e.From.Name, e.To.Name, e.From.Name),
		Details: map[string]any{"machine": e.Machine, "recordCluster": e.From.Name, "cluster": e.To.Name}}
}

// Resolve is the one rule that names the cluster a call is about, from the registered
// clusters (all), the cluster of the machine's record (record; nil when the name has no
// record, or a record not enrolled anywhere yet) and the call's `cluster` argument (given;
// "" when left out). machine names the machine (or member) in refusals ("" for none):
//
//   - record and argument agree: that cluster;
//   - they differ: *MovedError (FAILED_PRECONDITION "m1 is a machine of rack1, not rack2");
//   - only one of them: that cluster (an argument naming no registered cluster is
//     NOT_FOUND on field cluster, listing those there are);
//   - neither: the only cluster, or INVALID_INPUT on field cluster naming them all; with
//     none registered, FAILED_PRECONDITION (register one, or set APELORA_INCUS_*).
//
// The gate (for scope), the services and the clients' messages all use it.
func Resolve(all []Cluster, machine string, record *int64, given string) (Cluster, error) {
	var byRecord *Cluster
	if record != nil {
		i := slices.IndexFunc(all, func(c Cluster) bool { return c.ID == *record })
		if i < 0 {
			return Cluster{}, apperr.New(apperr.Internal, "the record of %s names cluster %d, which is not registered", machine, *record)
		}
		byRecord = &all[i]
	}
	var byName *Cluster
	if given != "" {
		i := slices.IndexFunc(all, func(c Cluster) bool { return c.Name == given })
		if i < 0 {
			return Cluster{}, &apperr.Error{Code: apperr.NotFound, Field: "cluster", Message: fmt.Sprintf(
				"no cluster named %s: %s; register it with registerCluster", apperr.Quote(given), registered(all))}
		}
		byName = &all[i]
	}
	switch {
	case byRecord != nil && byName != nil && byRecord.ID != byName.ID:
		return *byName, &MovedError{Machine: machine, From: *byRecord, To: *byName}
	case byName != nil:
		return *byName, nil
	case byRecord != nil:
		return *byRecord, nil
	case len(all) == 1:
		return all[0], nil
	case len(all) == 0:
		return Cluster{}, apperr.New(apperr.FailedPrecondition, "no Incus cluster is registered: register one with registerCluster, or set APELORA_INCUS_URL (or APELORA_INCUS_SOCKET) and restart Apelora")
	}
	what := "the call names no machine"
	if machine != "" {
		what = machine + " has no machine record in a cluster"
	}
	return Cluster{}, &apperr.Error{Code: apperr.InvalidInput, Field: "cluster", Message: fmt.Sprintf(
		"name the cluster: %s and Apelora manages %s", what, strings.Join(names(all), ", "))}
}

// registered lists the registered clusters' names for a refusal.
func registered(all []Cluster) string {
	if len(all) == 0 {
		return "no cluster is registered"
	}
	return "registered are " + strings.Join(names(all), ", ")
}

func names(all []Cluster) []string {
	out := make([]string, len(all))
	for i, c := range all {
		out[i] = c.Name
	}
	slices.Sort(out)
	return out
}

// Lister lists the registered clusters (the Registry), ordered by name.
type Lister interface {
	All() []Cluster
}

// Unassigned is the cluster a machine record that names no cluster (registered before
// clusters were records, or never enrolled) counts for: the environment's (APELORA_INCUS_*),
// as every record did before; false when there is none. The one place this rule is
// written: OfRecord, the fleet's join and the count of a cluster's records (References)
// all ask it.
func Unassigned(all []Cluster) (Cluster, bool) {
	if i := slices.IndexFunc(all, func(c Cluster) bool { return c.FromEnvironment }); i >= 0 {
		return all[i], true
	}
	return Cluster{}, false
}

// OfRecord is Resolve for a machine whose record is read: a record that names no cluster
// counts for Unassigned's; without one, Resolve decides alone. Enrolment, admission and
// placement's checks name a call's cluster with it.
func OfRecord(all []Cluster, machine string, record *int64, given string) (Cluster, error) {
	if record == nil {
		if c, ok := Unassigned(all); ok {
			id := c.ID
			record = &id
		}
	}
	return Resolve(all, machine, record, given)
}

// RecordScope is what a machine record says of where a call about it acts: whether the
// record exists, and its cluster (nil: enrolled in none).
type RecordScope struct {
	Found   bool
	Cluster *int64
}

// ScopeFacts are the records a call names that lie in a cluster, read at once (one
// query): the machine record of the name the call is about, the one of the MAAS system id
// it names, and the cluster of the rolling reboot it names (nil: none).
type ScopeFacts struct {
	Machine, SystemID RecordScope
	RollingReboot     *int64
}

// ScopeReader reads ScopeFacts (the store).
type ScopeReader interface {
	// ScopeFacts reads the records named (an empty argument names none).
	ScopeFacts(ctx context.Context, machine, systemID, rollingReboot string) (ScopeFacts, error)
}

// Authorised is what the gate allowed a caller who may manage some clusters only: the
// machine the call is about and the clusters it was allowed to act in. The change
// (adapters/postgres) checks again under the machine's lease that the machine's record is
// still in one of them, so a record moved to another cluster between the gate's check and
// the change is refused rather than changed by an identity that may not manage it there.
type Authorised struct {
	Machine  string
	Clusters []int64
}

type authorisedKey struct{}

// WithAuthorised returns ctx carrying a (nil: none to check again).
func WithAuthorised(ctx context.Context, a *Authorised) context.Context {
	return context.WithValue(ctx, authorisedKey{}, a)
}

// AuthorisedFrom returns what ctx carries, or nil.
func AuthorisedFrom(ctx context.Context) *Authorised {
	a, _ := ctx.Value(authorisedKey{}).(*Authorised)
	return a
}
