package clusters

import (
	"errors"

	"github.com/apelora/fabric/domain/machines"
)

// OfMember names the cluster of a call about the member called name, whose machine record
// (of the same name) is rec, nil when it has none, and returns the member's record:
//
//   - with a record and no other cluster given: the record's cluster (OfRecord; a record
//     naming none counts for the environment's), and the record;
//   - with a record and another cluster given: that cluster's member of the same name,
//     which is no machine of Apelora's (a record is its own cluster's machine; a member
//     name is unique within its cluster only, so b's m1 stays reachable while a has a
//     machine m1), and no record;
//   - without a record: Resolve alone (the cluster given, else the only one, else
//     INVALID_INPUT naming them).
//
// Evacuations, restores, rolling reboots and fence mappings name their cluster with it;
// steps about a machine (enrolment, install) use OfRecord, where another cluster given
// moves the record.
func OfMember(all []Cluster, name string, rec *machines.Record, given string) (Cluster, *machines.Record, error) {
	if rec == nil {
		cl, err := Resolve(all, name, nil, given)
		return cl, nil, err
	}
	cl, err := OfRecord(all, name, rec.Cluster, given)
	var other *MovedError
	if errors.As(err, &other) {
		return other.To, nil, nil
	}
	if err != nil {
		return cl, nil, err
	}
	return cl, rec, nil
}
