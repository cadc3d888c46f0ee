// Package public holds the Go types and client generated from
// openapi/fleet-manager.yaml. Do not edit public.gen.go: change the spec and
// run `make generate`.
package public

//go:generate go tool oapi-codegen -config oapi-codegen.yaml ../../../openapi/fleet-manager.yaml
