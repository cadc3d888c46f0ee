// Package admin holds the Go types and client generated from
// openapi/fleet-manager-admin.yaml. Do not edit admin.gen.go: change the spec and
// run `make generate`.
package admin

//go:generate go tool oapi-codegen -config oapi-codegen.yaml ../../../openapi/fleet-manager-admin.yaml
