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

// Public is the file name of the public API's specification.
const Public = "fleet-manager.yaml"
