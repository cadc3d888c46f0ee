// Package private holds the Go types and client generated from
// openapi/fleet-manager-private.yaml. Do not edit private.gen.go: change the spec and
// run `make generate`.
package private

//go:generate go tool oapi-codegen -config oapi-codegen.yaml ../../../openapi/fleet-manager-private.yaml
