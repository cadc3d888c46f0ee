package templates

import "embed"

// FS holds the templates of this directory (service-template.yml,
// db-template.yml, cnpg-template.yml, ...), so that tests elsewhere can process or apply them without
// knowing where the repository keeps them. It is only ever read.
//
//go:embed *.yml
var FS embed.FS
