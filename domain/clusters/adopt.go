package clusters

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/apelora/fabric/domain/audit"
	"github.com/apelora/fabric/internal/apperr"
)

// DefaultName is the environment's cluster's name when APELORA_INCUS_CLUSTER_NAME is unset,
// and the placeholder's an upgraded database holds.
const DefaultName = "default"

// The audit event of an adoption: a change the server makes on its own at start, in no
// administrator's name (as admission.MarkCarriedOver's).
const (
	AdoptAction    = "adoptCluster"
	MigrationActor = "apelora (migration)"
)

// Environment is the cluster APELORA_INCUS_* names.
type Environment struct {
	// Name is APELORA_INCUS_CLUSTER_NAME, else DefaultName: it names an adoption only (a
	// cluster adopted once keeps its name).
	Name string
	// Seeds are APELORA_INCUS_URL's member URLs; Socket APELORA_INCUS_SOCKET.
	Seeds  []string
	Socket string
	// CertificatePEM is the cluster certificate: APELORA_INCUS_SERVER_CERT's content, or
	// for the socket what GET /1.0 says (environment.certificate); "" when the socket's
	// daemon could not be asked.
	CertificatePEM string
}

// errNothingToAdopt ends an adoption that changes nothing, without an audit event.
var errNothingToAdopt = errors.New("nothing to adopt")

// Adopt makes the environment's cluster a record at start (API and worker alike, before
// they serve or fence), as an audited change of its own (actor MigrationActor, action
// AdoptAction, request requestID) when it changes anything:
//
//   - the placeholder of an upgraded database is filled (named env.Name, its connection
//     and certificate), so every record, admission and fence mapping it holds is that
//     cluster's;
//   - on a database with no environment's cluster, a record is made the same way;
//   - an adopted record whose certificate is not the environment's is refused, naming
//     both fingerprints: a process must never act on one cluster with another's records
//     (the caller refuses to start);
//   - otherwise the environment's URLs join the record's seeds and its connection (socket
//     or HTTPS) follows the environment; APELORA_INCUS_CLUSTER_NAME is not read again.
//
// It returns the environment's cluster as recorded.
func (s *Service) Adopt(ctx context.Context, env Environment, requestID string) (Cluster, error) {
	if env.Name == "" {
		env.Name = DefaultName
	}
	if err := ValidateName("APELORA_INCUS_CLUSTER_NAME", env.Name); err != nil {
		return Cluster{}, err
	}
	var fps []string
	pemText := ""
	if env.CertificatePEM != "" {
		var err error
		if pemText, fps, err = ParseCertificates("APELORA_INCUS_SERVER_CERT", env.CertificatePEM); err != nil {
			return Cluster{}, err
		}
	}
	if env.Socket == "" && len(fps) == 0 {
		return Cluster{}, apperr.New(apperr.InvalidInput, "APELORA_INCUS_URL needs APELORA_INCUS_SERVER_CERT: the cluster certificate to pin")
	}
	// Decided first from a read: a start that changes nothing writes nothing, so it needs
	// no lease and no audit key (a worker without the key starts once a server adopted the
	// cluster). A change decides again from what it reads under the clusters' lease.
	all, err := s.Store.Clusters(ctx)
	if err != nil {
		return Cluster{}, err
	}
	a, err := decideAdoption(all, env, pemText, fps)
	if err != nil || a.change == "" {
		return a.cluster, err
	}
	act := &audit.Action{Actor: MigrationActor, Name: AdoptAction, RequestID: requestID,
		Parameters: map[string]any{"name": env.Name, "seeds": env.Seeds, "socket": env.Socket}}
	var adopted Cluster
	err = s.Store.Change(audit.WithAction(ctx, act), func(tx Tx) error {
		all, err := tx.Clusters(ctx)
		if err != nil {
			return err
		}
		a, err := decideAdoption(all, env, pemText, fps)
		if err != nil {
			return err
		}
		if a.change == "" {
			adopted = a.cluster
			return errNothingToAdopt
		}
		act.Detail("cluster", a.cluster.Name)
		act.Detail("made", a.change)
		if a.insert {
			adopted, err = tx.Insert(ctx, a.cluster)
			return err
		}
		adopted = a.cluster
		return tx.Update(ctx, a.cluster)
	})
	if errors.Is(err, errNothingToAdopt) {
		err = nil
	}
	if err != nil {
		return Cluster{}, err
	}
	s.refresh(ctx)
	return adopted, nil
}

// adoption is what a start does with the environment's cluster: the record as it will be,
// whether it is new, and what the change makes ("" : nothing to change).
type adoption struct {
	cluster Cluster
	insert  bool
	change  string
}

// decideAdoption is Adopt's rule, on every cluster record as read.
func decideAdoption(all []Cluster, env Environment, pemText string, fps []string) (adoption, error) {
	i := slices.IndexFunc(all, func(c Cluster) bool { return c.FromEnvironment })
	if i < 0 {
		if err := adoptable(all, -1, env.Name, fps); err != nil {
			return adoption{}, err
		}
		return adoption{insert: true, change: "a record for the cluster of APELORA_INCUS_*",
			cluster: Cluster{Name: env.Name, SeedURLs: seeds(nil, env.Seeds), Socket: env.Socket, CertificatePEM: pemText,
				Fingerprint: first(fps), FromEnvironment: true, Adopted: true, RegisteredBy: MigrationActor}}, nil
	}
	cur := all[i]
	next := cur
	change := "the connection of the cluster of APELORA_INCUS_*"
	if !cur.Adopted {
		if err := adoptable(all, i, env.Name, fps); err != nil {
			return adoption{}, err
		}
		next.Name, next.Adopted = env.Name, true
		change = "the cluster carried over from the previous release, adopted"
	} else if err := sameCluster(cur, env, fps); err != nil {
		return adoption{}, err
	}
	next.Socket = env.Socket
	next.SeedURLs = seeds(cur.SeedURLs, env.Seeds)
	if env.Socket != "" && len(env.Seeds) == 0 {
		next.SeedURLs = cur.SeedURLs // a socket cluster keeps the seeds it had
	}
	if len(fps) > 0 && !slices.Contains(Fingerprints(cur.CertificatePEM), fps[0]) || cur.CertificatePEM == "" && pemText != "" {
		next.CertificatePEM, next.Fingerprint = pemText, fps[0]
	}
	if same(cur, next) {
		return adoption{cluster: cur}, nil
	}
	return adoption{cluster: next, change: change}, nil
}

// adoptable refuses an environment's cluster whose name or certificate another record
// (not the one at self) holds.
func adoptable(all []Cluster, self int, name string, fps []string) error {
	for j, c := range all {
		if j == self {
			continue
		}
		if c.Name == name {
			return apperr.New(apperr.AlreadyExists, "APELORA_INCUS_CLUSTER_NAME names cluster %s, which is registered with another connection: give the environment's cluster another name (APELORA_INCUS_CLUSTER_NAME)", name)
		}
		for _, fp := range Fingerprints(c.CertificatePEM) {
			if slices.Contains(fps, fp) {
				return apperr.New(apperr.AlreadyExists, "APELORA_INCUS_* names the cluster registered as %s (certificate %s): remove it with removeCluster to adopt it from the environment, or unset APELORA_INCUS_URL, APELORA_INCUS_SERVER_CERT and APELORA_INCUS_SOCKET (it is reached as a registered cluster)", c.Name, fp)
			}
		}
	}
	return nil
}

// sameCluster refuses an environment that names another cluster than the adopted one.
func sameCluster(cur Cluster, env Environment, fps []string) error {
	pinned := Fingerprints(cur.CertificatePEM)
	switch {
	case len(fps) > 0 && len(pinned) > 0:
		for _, fp := range fps {
			if slices.Contains(pinned, fp) {
				return nil
			}
		}
		return apperr.New(apperr.FailedPrecondition, "APELORA_INCUS_* names another cluster than %s, which Apelora adopted from it: its certificate is %s, the adopted cluster's %s. Apelora refuses to start rather than act on one cluster with another's records: point APELORA_INCUS_URL, APELORA_INCUS_SERVER_CERT (or APELORA_INCUS_SOCKET) back at cluster %s, and register the other one with registerCluster",
			cur.Name, fps[0], pinned[0], cur.Name)
	case len(fps) == 0 && env.Socket != cur.Socket:
		return apperr.New(apperr.Unavailable, "APELORA_INCUS_SOCKET (%s) is not the socket cluster %s was adopted through (%s), and its daemon could not be asked for its certificate: Apelora cannot tell whether it is the same cluster. Start it, or point APELORA_INCUS_SOCKET back at %s",
			env.Socket, cur.Name, orNone(cur.Socket), orNone(cur.Socket))
	}
	return nil
}

// seeds are had followed by the environment's URLs not among them, at most MaxSeeds.
func seeds(had, env []string) []string {
	out := slices.Clone(had)
	for _, u := range env {
		if !slices.Contains(out, u) && len(out) < MaxSeeds {
			out = append(out, u)
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// Describe names a cluster's connection for logs.
func (c Cluster) Describe() string {
	if c.Socket != "" {
		return fmt.Sprintf("cluster %s (unix:%s)", c.Name, c.Socket)
	}
	return fmt.Sprintf("cluster %s (%d seed URLs, certificate %s)", c.Name, len(c.SeedURLs), orNone(c.Fingerprint))
}
