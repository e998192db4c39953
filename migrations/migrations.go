// Package migrations holds the database schema as ordered SQL files, embedded in the
// binary so `apelora migrate` and `apelora serve` need nothing beside it.
//
// Files are named NNNN_what.sql and applied once each, in order, each in its own
// transaction. Never edit a file that has shipped: add a new one.
package migrations

import "embed"

//go:embed *.sql
var Files embed.FS
