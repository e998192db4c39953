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
	"github.com/apelora/fabric/domain/clusters"
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
	incusPortsOf := []string{"machines.Service.Membership", "fleet.Service.Incus", "fleet.One.Incus",
		"provisioning.Service.Membership", "fencing.Service.Membership",
		"resolvers.Resolver.Versions"}
	// The services that act in a machine's record's cluster take the pool's ports per
	// cluster, and the registered clusters.
	poolPortsOf := map[string]string{
		"enrolment.Service.Ports": "clusters.PortsFunc[github.com/apelora/fabric/domain/enrolment.Incus]", "enrolment.Service.Clusters": "*clusters.Registry",
		"admission.Checker.Ports": "clusters.PortsFunc[github.com/apelora/fabric/domain/admission.Incus]", "admission.Checker.Clusters": "*clusters.Registry",
		"admission.Service.Members": "clusters.PortsFunc[github.com/apelora/fabric/domain/admission.Members]",
		"placement.Service.Ports":   "clusters.PortsFunc[github.com/apelora/fabric/domain/placement.Incus]", "placement.Service.Clusters": "*clusters.Registry",
		"admission.Checker.Guard":   "*placement.Service",
		"maintenance.Service.Ports": "clusters.PortsFunc[github.com/apelora/fabric/domain/maintenance.Incus]", "maintenance.Service.Clusters": "*clusters.Registry",
		"rolling.Service.Ports": "clusters.PortsFunc[github.com/apelora/fabric/domain/rolling.Incus]", "rolling.Service.Clusters": "*clusters.Registry",
	}
	maasPortsOf := []string{"machines.Service.MAAS", "fleet.Service.MAAS", "fleet.One.MAAS", "admission.Checker.MAAS",
		"admission.Checker.MAASInventory", "provisioning.Service.MAAS", "provisioning.Service.ImageSource",
		"provisioning.Service.Hardware"}
	for _, c := range []struct {
		name        string
		incus, maas bool
	}{{"incus only", true, false}, {"maas only", false, true}, {"both", true, true}, {"neither", false, false}} {
		t.Run(c.name, func(t *testing.T) {
			var incusSide *incus.Ports
			var pool *incus.Pool
			var maasSide *maas.Ports
			registry := clusters.NewRegistry(nil)
			want := map[string]string{}
			if c.incus {
				incusSide = &incus.Ports{}
				pool = incus.NewPool(nil, registry, incus.Config{})
				for _, f := range incusPortsOf {
					want[f] = "*incus.Ports"
				}
				maps.Copy(want, poolPortsOf)
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
			wirePorts(res, enrol, pool, registry, incusSide, maasSide)
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
