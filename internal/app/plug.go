package app

import "reflect"

// plug puts an upstream's ports (side: *incusPorts or *maasPorts) into the services: every
// exported field of an interface type that is still nil and that side implements. So a
// domain service that declares another port, or a port that gains a method, needs no
// wiring line of its own. A nil side (the upstream is not configured) plugs nothing: an
// interface holding a nil pointer would not be nil. Set a field before plugging to give it
// something else (a wrapper with metrics, another client).
func plug(side any, services ...any) {
	sv := reflect.ValueOf(side)
	if !sv.IsValid() || sv.Kind() == reflect.Pointer && sv.IsNil() {
		return
	}
	for _, s := range services {
		v := reflect.ValueOf(s).Elem()
		for i := range v.NumField() {
			f, ft := v.Field(i), v.Type().Field(i)
			if !ft.IsExported() || f.Kind() != reflect.Interface || ft.Type.NumMethod() == 0 || !f.IsNil() {
				continue
			}
			if sv.Type().Implements(ft.Type) {
				f.Set(sv)
			}
		}
	}
}
