package server

import (
	"context"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/apelora/fabric/graph/model"
)

// fleetRows answers a read's Fleet.machines with the rows written in one pass
// (encodeList), instead of gqlgen's execution of each field of each row. gqlgen's executor
// gives every field of every row a field context, a resolver call, closures, a marshaller
// value and a goroutine per row: for the fleet query about 290 allocations a row and,
// on 300 rows, most of the time the query spends past its slowest upstream call
// (bench/README.md, "The fleet query"). The rows are the resolver's (Fleet.machines is
// a plain field of the model mapFleet builds); only their encoding changes, and it is
// the encoding gqlgen's executor writes, byte for byte (rowsjson_test.go compares the two
// on every selection the console and the clients make and on generated ones). A
// selection it cannot write exactly as gqlgen would (a field gqlgen's generated field
// context says a resolver or a method answers, such as Member.version; a field with
// arguments; the Map scalar or any type bound to something other than the generated
// models and gqlgen's own scalars; an interface or a union; @defer) and a row gqlgen would
// answer with an error (a null where the schema says non-null, a float JSON cannot hold)
// are left to gqlgen's executor, whole.
type fleetRows struct{ schema *ast.Schema }

func (fleetRows) ExtensionName() string                   { return "FleetRows" }
func (fleetRows) Validate(graphql.ExecutableSchema) error { return nil }
func (f fleetRows) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil || oc.Operation.Operation != ast.Query {
		return nil
	}
	inner := oc.ResolverMiddleware
	oc.ResolverMiddleware = func(ctx context.Context, next graphql.Resolver) (any, error) {
		fc := graphql.GetFieldContext(ctx)
		if fc == nil || fc.Object != "Fleet" || fc.Field.Name != "machines" {
			return inner(ctx, next)
		}
		res, err := inner(ctx, next)
		rows, ok := res.([]*model.Machine)
		if err != nil || !ok {
			return res, err
		}
		if b, ok := encodeList(ctx, f.schema, graphql.GetOperationContext(ctx), fc, rows); ok {
			return rawJSON(b), nil
		}
		return res, nil
	}
	return nil
}

// rawJSON is a value already written as JSON.
type rawJSON []byte

func (r rawJSON) MarshalGQL(w io.Writer) { _, _ = w.Write(r) }

// encodeList writes list, the value of the field fc is about (a list of objects in the
// model's types), as gqlgen's executor would; false when the selection or a row needs
// gqlgen's own execution.
func encodeList(ctx context.Context, schema *ast.Schema, oc *graphql.OperationContext, fc *graphql.FieldContext, list any) ([]byte, bool) {
	if fc.Field.Definition == nil || fc.Child == nil {
		return nil, false
	}
	v := reflect.ValueOf(list)
	c := compiler{ctx: ctx, schema: schema, oc: oc}
	enc, ok := c.compileType(fc.Field.Definition.Type, fc.Field.Selections, fc.Child, v.Type())
	if !ok {
		return nil, false
	}
	return enc.encode(make([]byte, 0, 64*1024), v)
}

// valueEncoder writes one GraphQL type (its selection, for an object) from a Go value of
// the model's type for it.
type valueEncoder struct {
	nonNull bool
	ptr     bool         // the Go value is a pointer to it
	goType  reflect.Type // after any pointer
	scalar  scalarKind   // for a scalar or an enum
	elem    *valueEncoder
	object  *ast.Definition // for an object, with its fields
	fields  []fieldEncoder
}

type scalarKind int

const (
	notScalar scalarKind = iota
	stringScalar
	intScalar
	floatScalar
	boolScalar
	timeScalar
	enumScalar
)

// fieldEncoder writes one response key of an object.
type fieldEncoder struct {
	key      []byte // `"alias":`
	typename string // __typename's answer; "" for a field
	index    []int  // the model's struct field
	value    *valueEncoder
}

var (
	timeType     = reflect.TypeOf(time.Time{})
	modelPackage = reflect.TypeOf(model.Machine{}).PkgPath()
)

// compiler prepares the encoding of one selection, once per query.
type compiler struct {
	ctx    context.Context
	schema *ast.Schema
	oc     *graphql.OperationContext
}

// compileType prepares the encoding of t, selected with sel, from Go values of goType;
// child is gqlgen's generated field context maker for t's fields (FieldContext.Child).
func (c compiler) compileType(t *ast.Type, sel ast.SelectionSet, child fieldContexts, goType reflect.Type) (*valueEncoder, bool) {
	schema := c.schema
	enc := &valueEncoder{nonNull: t.NonNull}
	if goType.Kind() == reflect.Pointer {
		enc.ptr, goType = true, goType.Elem()
	}
	enc.goType = goType
	if t.Elem != nil {
		if goType.Kind() != reflect.Slice {
			return nil, false
		}
		elem, ok := c.compileType(t.Elem, sel, child, goType.Elem())
		enc.elem = elem
		return enc, ok
	}
	def := schema.Types[t.NamedType]
	if def == nil {
		return nil, false
	}
	switch def.Kind {
	case ast.Enum:
		// gqlgen's generated enums (graph/model) write strconv.Quote of their value; a
		// type bound to something else may write otherwise.
		enc.scalar = enumScalar
		return enc, goType.Kind() == reflect.String && goType.PkgPath() == modelPackage
	case ast.Scalar:
		enc.scalar = scalarOf(def.Name, goType)
		return enc, enc.scalar != notScalar
	case ast.Object:
		// Only the generated models: their fields are struct fields (a bound type may
		// answer a field with a method). A type behind an interface or in a union
		// collects its fragments by more names than its own: left to gqlgen.
		if goType.Kind() != reflect.Struct || goType.PkgPath() != modelPackage || len(schema.GetImplements(def)) > 0 {
			return nil, false
		}
		enc.object = def
		return enc, c.compileObject(enc, sel, child)
	}
	return nil, false
}

// scalarOf is how gqlgen writes the scalar name from goType (graphql.MarshalString,
// MarshalInt, MarshalFloatContext, MarshalBoolean, MarshalTime); notScalar for any other
// (Map, a custom scalar, a Go type of its own).
func scalarOf(name string, goType reflect.Type) scalarKind {
	if goType.PkgPath() != "" && goType != timeType {
		return notScalar
	}
	switch {
	case (name == "String" || name == "ID") && goType.Kind() == reflect.String:
		return stringScalar
	case name == "Int" && (goType.Kind() == reflect.Int || goType.Kind() == reflect.Int64 || goType.Kind() == reflect.Int32):
		return intScalar
	case name == "Float" && goType.Kind() == reflect.Float64:
		return floatScalar
	case name == "Boolean" && goType.Kind() == reflect.Bool:
		return boolScalar
	case name == "Time" && goType == timeType:
		return timeScalar
	}
	return notScalar
}

// fieldContexts is gqlgen's generated FieldContext.Child: the field context gqlgen's
// executor gives a field of the object.
type fieldContexts = func(context.Context, graphql.CollectedField) (*graphql.FieldContext, error)

// compileObject collects sel's fields as gqlgen's executor does (graphql.CollectFields:
// fragments, @skip and @include, aliases, fields selected twice merged under one response
// key) and prepares each. A field gqlgen's generated code answers with a resolver or a
// method (its own field context says so) is left to gqlgen, as is one the model has no
// struct field for.
func (c compiler) compileObject(enc *valueEncoder, sel ast.SelectionSet, child fieldContexts) bool {
	if child == nil {
		return false
	}
	for _, f := range graphql.CollectFields(c.oc, sel, []string{enc.object.Name}) {
		if len(f.Deferrables) > 0 {
			return false
		}
		fe := fieldEncoder{key: append(appendQuoted(nil, f.Alias), ':')}
		if f.Name == "__typename" {
			fe.typename = enc.object.Name
			enc.fields = append(enc.fields, fe)
			continue
		}
		if f.Definition == nil || len(f.Definition.Arguments) > 0 {
			return false
		}
		fc, err := child(c.ctx, f)
		if err != nil || fc.IsResolver || fc.IsMethod {
			return false // answered by a resolver or a method, not read from the model
		}
		sf, ok := structField(enc.goType, f.Name)
		if !ok {
			return false // the model has no field for it
		}
		v, ok := c.compileType(f.Definition.Type, f.Selections, fc.Child, sf.Type)
		if !ok {
			return false
		}
		fe.index, fe.value = sf.Index, v
		enc.fields = append(enc.fields, fe)
	}
	return true
}

// structField finds the model's field for the GraphQL field name by its json tag, the
// name gqlgen's model generator gives it.
func structField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if tag == name && sf.IsExported() {
			return sf, true
		}
	}
	return reflect.StructField{}, false
}

// encode appends v; false where gqlgen would answer an error (a null the schema does not
// allow, a float JSON cannot hold).
func (e *valueEncoder) encode(buf []byte, v reflect.Value) ([]byte, bool) {
	if e.ptr {
		if v.IsNil() {
			return appendNull(buf, e.nonNull)
		}
		v = v.Elem()
	}
	switch {
	case e.elem != nil:
		if v.IsNil() && !e.nonNull {
			return append(buf, "null"...), true // gqlgen: a nil slice is [] only where the list is non-null
		}
		buf = append(buf, '[')
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				buf = append(buf, ',')
			}
			var ok bool
			if buf, ok = e.elem.encode(buf, v.Index(i)); !ok {
				return buf, false
			}
		}
		return append(buf, ']'), true
	case e.object != nil:
		buf = append(buf, '{')
		for i := range e.fields {
			f := &e.fields[i]
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, f.key...)
			if f.typename != "" {
				buf = appendQuoted(buf, f.typename)
				continue
			}
			var ok bool
			if buf, ok = f.value.encode(buf, v.FieldByIndex(f.index)); !ok {
				return buf, false
			}
		}
		return append(buf, '}'), true
	}
	switch e.scalar {
	case stringScalar:
		return appendQuoted(buf, v.String()), true
	case enumScalar:
		// A generated enum's MarshalGQL: strconv.Quote of its value.
		return strconv.AppendQuote(buf, v.String()), true
	case intScalar:
		return strconv.AppendInt(buf, v.Int(), 10), true
	case floatScalar:
		f := v.Float()
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return buf, false
		}
		return strconv.AppendFloat(buf, f, 'g', -1, 64), true // fmt's %g
	case boolScalar:
		return strconv.AppendBool(buf, v.Bool()), true
	case timeScalar:
		var t time.Time
		if v.CanAddr() {
			t = *v.Addr().Interface().(*time.Time) // no copy to the heap
		} else {
			t = v.Interface().(time.Time)
		}
		if t.IsZero() {
			return appendNull(buf, e.nonNull) // graphql.MarshalTime: the zero time is null
		}
		// graphql.MarshalTime quotes the RFC 3339 text with strconv.Quote: it is printable
		// ASCII with no quote or backslash, so the quotes alone.
		buf = append(buf, '"')
		buf = t.AppendFormat(buf, time.RFC3339Nano)
		return append(buf, '"'), true
	}
	return buf, false
}

func appendNull(buf []byte, nonNull bool) ([]byte, bool) {
	if nonNull {
		return buf, false
	}
	return append(buf, "null"...), true
}

// appendQuoted quotes s as graphql.MarshalString does: only ", \ and control characters
// are escaped (\t, \r, \n by name, the others as \u00XX); everything else, invalid UTF-8
// included, is copied as it is. (It walks bytes where gqlgen walks runes: a byte of a
// multi-byte rune, or an invalid one, is never below 0x80, so neither escapes it.)
func appendQuoted(buf []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '\\' && c != '"' {
			continue
		}
		buf = append(buf, s[start:i]...)
		switch c {
		case '\t':
			buf = append(buf, `\t`...)
		case '\r':
			buf = append(buf, `\r`...)
		case '\n':
			buf = append(buf, `\n`...)
		case '\\':
			buf = append(buf, `\\`...)
		case '"':
			buf = append(buf, `\"`...)
		default:
			buf = append(buf, `\u00`...)
			buf = append(buf, hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
