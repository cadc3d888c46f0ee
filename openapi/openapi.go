// Package openapi embeds the service's OpenAPI specifications, so the binary
// serves and validates against exactly the documents it was built with.
package openapi

import (
	"embed"
)

// Specs holds every *.yaml specification of this folder.
//
//go:embed *.yaml
var Specs embed.FS

// The specification files: the public API, the admin API (hubs) and the
// private API the hub agents call.
const (
	Public  = "fleet-manager.yaml"
	Admin   = "fleet-manager-admin.yaml"
	Private = "fleet-manager-private.yaml"
)

// All lists every specification the API server serves.
func All() []string { return []string{Public, Admin, Private} }
