package clusters

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/domain/membership"
	"github.com/apelora/fabric/domain/plan"
	"github.com/apelora/fabric/internal/apperr"
)

// Store is what the clusters' changes and reads need of the database.
type Store interface {
	Source
	// Change runs fn as the change of the mutation in progress (or of the action in ctx:
	// adoption), holding the clusters' lease, and writes its audit event.
	Change(ctx context.Context, fn func(Tx) error) error
	// References says what names the cluster now.
	References(ctx context.Context, id int64) (References, error)
}

// Tx is a change to the cluster records.
type Tx interface {
	// Clusters reads every record inside the change (it sees the change's own writes).
	Clusters(ctx context.Context) ([]Cluster, error)
	// Insert records c (its ID is ignored) and returns it as recorded (ID 0 in a plan). A
	// name or fingerprint taken by a change that committed meanwhile is ALREADY_EXISTS.
	Insert(ctx context.Context, c Cluster) (Cluster, error)
	// Update rewrites the record c.ID with c's name, seeds, socket, certificate,
	// fingerprint and adopted flag (adoption).
	Update(ctx context.Context, c Cluster) error
	// Delete removes the record c.ID with what goes with it (its scoped grants, its fence
	// worker state and tracked members); a machine record or fence mapping naming it is a
	// FAILED_PRECONDITION saying so (the foreign keys). The history of ended admissions and
	// finished tasks stays, naming the removed cluster's id (never reused).
	Delete(ctx context.Context, c Cluster) error
	// References says what names the cluster, read in the change.
	References(ctx context.Context, id int64) (References, error)
}

// References is what names a cluster: removeCluster is refused while any of the first five
// is not zero; the last three go with the cluster.
type References struct {
	// MachineRecords name the cluster; once Counted, also those that name none when the
	// cluster is the one they count for (Unassigned).
	MachineRecords int
	// UnassignedRecords name no cluster (whichever cluster they count for).
	UnassignedRecords       int
	FenceMappings           int
	OpenAdmissions          int
	UnfinishedRollingReboot int
	RunningMaintenanceTasks int
	Grants                  int
	TrackedMembers          int
	FenceState              int
}

// Counted is r with the records that name no cluster counted for c when c is the cluster
// they count for (Unassigned over all).
func (r References) Counted(c Cluster, all []Cluster) References {
	if u, ok := Unassigned(all); ok && u.ID == c.ID {
		r.MachineRecords += r.UnassignedRecords
	}
	r.UnassignedRecords = 0
	return r
}

// Refusal is why a cluster cannot be removed now, in the administrator's words ("" when
// it can): the one rule removeCluster applies and the clusters query shows.
func (r References) Refusal(name string) string {
	var what []string
	add := func(n int, one, many string) {
		switch {
		case n == 1:
			what = append(what, "1 "+one)
		case n > 1:
			what = append(what, fmt.Sprintf("%d %s", n, many))
		}
	}
	add(r.MachineRecords, "machine record", "machine records")
	add(r.FenceMappings, "fence mapping", "fence mappings")
	add(r.OpenAdmissions, "admission", "admissions")
	add(r.UnfinishedRollingReboot, "unfinished rolling reboot", "unfinished rolling reboots")
	add(r.RunningMaintenanceTasks, "running evacuation or restore", "running evacuations or restores")
	if len(what) == 0 {
		return ""
	}
	return fmt.Sprintf("cluster %s is still named by %s: remove its members' records (removeMember, unregisterMachine), fence mappings (removeFenceMapping) and let its rolling reboot and maintenance tasks end first", name, strings.Join(what, ", "))
}

// Probe reads a cluster once before it is registered, with Apelora's client identity
// (adapters/incus.Probe).
type Probe interface {
	// Identity is Apelora's Incus client certificate (PEM, public) and its fingerprint;
	// ok is false when none is configured (APELORA_INCUS_CLIENT_CERT/KEY unset).
	Identity() (certificatePEM, fingerprint string, ok bool)
	// Read connects to url with the client identity, pinned to certificatePEM's blocks,
	// and reads GET /1.0 and, when the cluster trusts Apelora, its member list. A member
	// presenting another certificate is *CertificateMismatch; one that cannot be reached
	// is UNAVAILABLE.
	Read(ctx context.Context, url, certificatePEM string) (Reading, error)
}

// Reading is what a probe read of a cluster.
type Reading struct {
	// Fingerprint of the certificate the member presented (one of the pinned).
	Fingerprint string
	// Trusted: Incus trusts Apelora's client certificate (GET /1.0 says auth: trusted).
	Trusted bool
	// Clustered: the server is a cluster member (a standalone server is refused).
	Clustered bool
	// ServerName and Version of the member asked.
	ServerName, Version string
	// Members with their roles and URLs (only when trusted).
	Members []membership.Member
}

// CertificateMismatch is a member that presented another certificate than the pinned.
type CertificateMismatch struct {
	URL       string
	Presented string // its fingerprint, "" when it presented none
}

func (e *CertificateMismatch) Error() string {
	return fmt.Sprintf("the member at %s presented certificate %s, not the one given", e.URL, orNone(e.Presented))
}

// Service registers, removes and adopts clusters, each an audited change.
type Service struct {
	Store    Store
	Probe    Probe // nil: no client identity and no Incus at all
	Registry *Registry
}

// Registered is a registered cluster with what its registration read.
type Registered struct {
	// Cluster as recorded (zero in a plan: a plan shows only what exists).
	Cluster Cluster
	Reading Reading
}

// RegisterAction names registerCluster's audit events.
const RegisterAction = "registerCluster"

// Register records a cluster: its plan connects once to the URL with Apelora's client
// identity pinned to the given certificate, reads the members and their roles and shows
// the fingerprint it will pin (plan.Read: the hash covers the fingerprint, trust, members
// and roles, nothing that moves with a clock). Refused: a name or a certificate already
// registered (the same cluster under two names), a member presenting another certificate,
// a cluster that does not trust Apelora yet (with the command that makes it), a server
// that is not clustered. Nothing is written to Incus.
func (s *Service) Register(ctx context.Context, actor, name, url, certificate string) (*Registered, error) {
	reg, err := ParseRegistration(name, url, certificate)
	if err != nil {
		return nil, err
	}
	if s.Probe == nil {
		return nil, apperr.NotConfigured(apperr.Incus)
	}
	_, clientFP, ok := s.Probe.Identity()
	if !ok {
		return nil, apperr.New(apperr.FailedPrecondition, "Apelora has no Incus client identity to reach another cluster with: set APELORA_INCUS_CLIENT_CERT and APELORA_INCUS_CLIENT_KEY (one certificate every cluster trusts) and restart Apelora")
	}
	if a := audit.ActionFrom(ctx); a != nil {
		a.Detail("fingerprint", reg.Fingerprints[0])
	}
	out := &Registered{}
	err = s.Store.Change(ctx, func(tx Tx) error {
		all, err := tx.Clusters(ctx)
		if err != nil {
			return err
		}
		if err := taken(all, reg.Name, reg.Fingerprints); err != nil {
			return err
		}
		rd, err := s.Probe.Read(ctx, reg.URL, reg.CertificatePEM)
		var mm *CertificateMismatch
		switch {
		case errors.As(err, &mm):
			return &apperr.Error{Code: apperr.FailedPrecondition, Field: "clusterCertificate", Message: fmt.Sprintf(
				"the member at %s presented the certificate with fingerprint %s, not the given certificate's %s: copy $INCUS_DIR/cluster.crt from a member of that cluster (or check the URL)",
				reg.URL, orNone(mm.Presented), reg.Fingerprints[0])}
		case err != nil:
			return err
		}
		if err := plan.Read(ctx, "cluster certificate at "+reg.URL, rd.Fingerprint); err != nil {
			return err
		}
		// The certificate presented may be another block of a cluster registered already.
		if err := taken(all, "", []string{rd.Fingerprint}); err != nil {
			return err
		}
		if err := plan.Read(ctx, "Incus trusts Apelora's client certificate "+clientFP, yes(rd.Trusted)); err != nil {
			return err
		}
		if !rd.Trusted {
			return apperr.New(apperr.FailedPrecondition,
				"the cluster at %s does not trust Apelora yet: on any member run `incus config trust add-certificate apelora.crt --name apelora` with apelora.crt holding Apelora's client certificate (APELORA_INCUS_CLIENT_CERT, fingerprint %s; the incusClientCertificate query shows it), then plan again",
				reg.URL, clientFP)
		}
		if err := plan.Read(ctx, "clustered", yes(rd.Clustered)); err != nil {
			return err
		}
		if !rd.Clustered {
			return apperr.New(apperr.FailedPrecondition,
				"the server at %s (%s) is not clustered: Apelora manages Incus clusters, whose join tokens enrol machines; turn it into a cluster (`incus cluster enable %s`) and register it then",
				reg.URL, rd.ServerName, orNone(rd.ServerName))
		}
		seeds := []string{reg.URL}
		for _, m := range sortedMembers(rd.Members) {
			if err := plan.Read(ctx, "member "+m.Name, memberFact(m)); err != nil {
				return err
			}
			if u := strings.TrimRight(m.URL, "/"); u != "" && !slices.Contains(seeds, u) && len(seeds) < MaxSeeds {
				seeds = append(seeds, u)
			}
		}
		if a := audit.ActionFrom(ctx); a != nil {
			a.Detail("members", len(rd.Members))
			a.Detail("seeds", seeds)
		}
		c, err := tx.Insert(ctx, Cluster{Name: reg.Name, SeedURLs: seeds, CertificatePEM: reg.CertificatePEM, Fingerprint: reg.Fingerprints[0],
			Adopted: true, RegisteredBy: actor})
		if err != nil {
			return err
		}
		out.Cluster, out.Reading = c, rd
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !plan.Active(ctx) {
		s.refresh(ctx)
	}
	return out, nil
}

// taken refuses a name (when not "") or a fingerprint already registered.
func taken(all []Cluster, name string, fps []string) error {
	for _, c := range all {
		if name != "" && c.Name == name {
			return &apperr.Error{Code: apperr.AlreadyExists, Field: "name", Message: fmt.Sprintf(
				"a cluster named %s is registered already: choose another name, or remove it first (removeCluster)", name)}
		}
		for _, fp := range Fingerprints(c.CertificatePEM) {
			if slices.Contains(fps, fp) {
				return &apperr.Error{Code: apperr.AlreadyExists, Field: "clusterCertificate", Message: fmt.Sprintf(
					"cluster %s has this certificate (fingerprint %s): it is the same cluster, registered already", c.Name, fp)}
			}
		}
	}
	return nil
}

func sortedMembers(ms []membership.Member) []membership.Member {
	out := slices.Clone(ms)
	slices.SortFunc(out, func(a, b membership.Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// memberFact is what a registration's plan shows of a member: its URL and roles (sorted),
// not its status, which moves on its own.
func memberFact(m membership.Member) string {
	roles := slices.Clone(m.Roles)
	slices.Sort(roles)
	if len(roles) == 0 {
		roles = []string{"no role"}
	}
	return strings.TrimRight(m.URL, "/") + ", roles " + strings.Join(roles, " ")
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// refresh has this process's registry read the records after a change (other replicas
// follow NOTIFY clusters); a failure leaves it to the next notification.
func (s *Service) refresh(ctx context.Context) {
	if s.Registry != nil {
		_ = s.Registry.Refresh(context.WithoutCancel(ctx))
	}
}

// Remove forgets a cluster: refused while any machine record, fence mapping, open
// admission, unfinished rolling reboot or running maintenance task names it
// (References.Refusal); its scoped grants, its fence worker state and tracked members go
// with it. Its history stays: ended admissions, finished evacuations, restores and rolling
// reboots, and fence events keep naming its id (never reused) and read as of no
// registered cluster. It returns the cluster as it was.
func (s *Service) Remove(ctx context.Context, name string) (*Cluster, error) {
	if err := ValidateName("name", name); err != nil {
		return nil, err
	}
	var removed *Cluster
	err := s.Store.Change(ctx, func(tx Tx) error {
		all, err := tx.Clusters(ctx)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(all, func(c Cluster) bool { return c.Name == name })
		if i < 0 {
			return &apperr.Error{Code: apperr.NotFound, Field: "name", Message: "no cluster named " + name + ": " + registered(all)}
		}
		c := all[i]
		if err := plan.Read(ctx, "cluster "+name, c.Fact()); err != nil {
			return err
		}
		refs, err := tx.References(ctx, c.ID)
		if err != nil {
			return err
		}
		refs = refs.Counted(c, all)
		if why := refs.Refusal(name); why != "" {
			return &apperr.Error{Code: apperr.FailedPrecondition, Field: "name", Message: why, Details: map[string]any{
				"machineRecords": refs.MachineRecords, "fenceMappings": refs.FenceMappings, "openAdmissions": refs.OpenAdmissions,
				"unfinishedRollingReboots": refs.UnfinishedRollingReboot, "runningMaintenanceTasks": refs.RunningMaintenanceTasks}}
		}
		if rec := plan.From(ctx); rec != nil && c.FromEnvironment {
			rec.Warn(apperr.FailedPrecondition, "cluster %s comes from APELORA_INCUS_*: it is adopted again at the next start while those settings name it", name)
		}
		if a := audit.ActionFrom(ctx); a != nil {
			a.Detail("fingerprint", c.Fingerprint)
			a.Detail("removedWithIt", map[string]any{"grants": refs.Grants, "trackedMembers": refs.TrackedMembers, "fenceState": refs.FenceState})
		}
		if err := tx.Delete(ctx, c); err != nil {
			return err
		}
		removed = &c
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !plan.Active(ctx) {
		s.refresh(ctx)
	}
	return removed, nil
}

// RemoveRefusal is why removeCluster would refuse the cluster now ("" when it would not):
// the same rule, for the clusters query.
func (s *Service) RemoveRefusal(ctx context.Context, c Cluster) (string, error) {
	refs, err := s.References(ctx, c)
	if err != nil {
		return "", err
	}
	return refs.Refusal(c.Name), nil
}

// References is what names c now, the records that name no cluster Counted.
func (s *Service) References(ctx context.Context, c Cluster) (References, error) {
	refs, err := s.Store.References(ctx, c.ID)
	if err != nil {
		return References{}, err
	}
	return refs.Counted(c, s.Registry.All()), nil
}

// List returns the clusters, by name; names keeps those (an unknown name is NOT_FOUND).
func (s *Service) List(ctx context.Context, names []string) ([]Cluster, error) {
	all := s.Registry.All()
	if names == nil {
		return all, nil
	}
	var out []Cluster
	for _, n := range names {
		c, err := s.Registry.Named(ctx, "names", n)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(out, func(o Cluster) bool { return o.ID == c.ID }) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b Cluster) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
