package app

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/apelora/fabric/adapters/incus"
	"github.com/apelora/fabric/adapters/maas"
	"github.com/apelora/fabric/domain/admission"
	"github.com/apelora/fabric/domain/enrolment"
	"github.com/apelora/fabric/domain/fencing"
	"github.com/apelora/fabric/domain/fleet"
	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/domain/maintenance"
	"github.com/apelora/fabric/domain/placement"
	"github.com/apelora/fabric/domain/provisioning"
	"github.com/apelora/fabric/domain/rolling"
	"github.com/apelora/fabric/resolvers"
)

// wirePorts fills the ports each upstream serves and no other field, with either upstream
// or both configured: a port forgotten, or one an upstream happens to implement but must
// not serve (the fencing worker's MAAS reader, say), shows up here; and an upstream that is
// not configured leaves its ports nil, never an interface holding a nil pointer.
func TestWirePortsFillsEachUpstreamsPorts(t *testing.T) {
	incusPortsOf := []string{"enrolment.Service.Incus", "machines.Service.Membership", "fleet.Service.Incus", "fleet.One.Incus",
		"admission.Checker.Incus", "admission.Service.Members", "provisioning.Service.Membership", "fencing.Service.Membership",
		"resolvers.Resolver.Versions", "placement.Service.Incus", "maintenance.Service.Incus", "rolling.Service.Incus"}
	maasPortsOf := []string{"machines.Service.MAAS", "fleet.Service.MAAS", "fleet.One.MAAS", "admission.Checker.MAAS",
		"admission.Checker.MAASInventory", "provisioning.Service.MAAS", "provisioning.Service.ImageSource",
		"provisioning.Service.Hardware"}
	for _, c := range []struct {
		name        string
		incus, maas bool
	}{{"incus only", true, false}, {"maas only", false, true}, {"both", true, true}, {"neither", false, false}} {
		t.Run(c.name, func(t *testing.T) {
			var incusSide *incus.Ports
			var maasSide *maas.Ports
			want := map[string]string{}
			if c.incus {
				incusSide = &incus.Ports{}
				for _, f := range incusPortsOf {
					want[f] = "*incus.Ports"
				}
			}
			if c.maas {
				maasSide = &maas.Ports{}
				for _, f := range maasPortsOf {
					want[f] = "*maas.Ports"
				}
			}
			enrol := &enrolment.Service{}
			res := &resolvers.Resolver{
				Machines: &machines.Service{}, View: &fleet.Service{One: &fleet.One{}}, Enrolment: enrol,
				Admission:    &admission.Service{Checker: &admission.Checker{}},
				Provisioning: &provisioning.Service{}, Fencing: &fencing.Service{}, Placement: &placement.Service{},
				Maintenance: &maintenance.Service{}, Rolling: &rolling.Service{},
			}
			wirePorts(res, enrol, incusSide, maasSide)
			got := map[string]string{}
			for _, s := range []any{enrol, res.Machines, res.View, res.View.One, res.Admission, res.Admission.Checker, res.Provisioning, res.Fencing, res.Placement, res.Maintenance, res.Rolling, res} {
				v := reflect.ValueOf(s).Elem()
				for i := range v.NumField() {
					if f := v.Field(i); f.Kind() == reflect.Interface && !f.IsNil() {
						got[v.Type().String()+"."+v.Type().Field(i).Name] = fmt.Sprintf("%T", f.Interface())
					}
				}
			}
			if !maps.Equal(got, want) {
				t.Errorf("wired %v\nwant %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
				for k, v := range got {
					if want[k] != v {
						t.Errorf("%s = %s, want %q", k, v, want[k])
					}
				}
			}
		})
	}
}
