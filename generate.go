// Package fabric is Apelora fabric: a control plane that takes a bare-metal server from
// "known" to "a checked, admitted Incus cluster member", served as one GraphQL API.
//
// `go generate ./...` regenerates graph/ (gqlgen), client/ (genqlient) and the mutations'
// declarations (internal/mutations, web/console/src/api/changes.gen.ts) from schema/, and
// docs/configuration.md from app's variable tables (internal/app/configdoc), and apperr's
// refused-or-failed table from web/console/src/lib/bulk-outcomes.json (internal/apperr/gen).
package fabric

//go:generate go tool gqlgen generate --config gqlgen.yml
//go:generate go tool genqlient client/genqlient.yaml
//go:generate go run ./internal/mutations/gen
//go:generate go run ./internal/app/configdoc
//go:generate go run ./internal/apperr/gen
