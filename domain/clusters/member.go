package clusters

import "github.com/apelora/fabric/domain/machines"

// OfMember names the cluster of a call about the member called name, whose machine record
// (of the same name) is rec, nil when it has none: with a record, OfRecord (its cluster, a
// record naming none counting for the environment's); without one, Resolve alone (the
// cluster given, else the only one, else INVALID_INPUT naming them), so a member of
// another cluster than the environment's, with no record, is reached by naming its
// cluster. Evacuations, restores and rolling reboots name their cluster with it.
func OfMember(all []Cluster, name string, rec *machines.Record, given string) (Cluster, error) {
	if rec == nil {
		return Resolve(all, name, nil, given)
	}
	return OfRecord(all, name, rec.Cluster, given)
}
