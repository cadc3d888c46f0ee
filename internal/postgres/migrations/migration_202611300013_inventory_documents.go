package migrations

import (
	"fmt"

	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202611300013InventoryDocuments stores a managed cluster's claims,
// capacity, allocatable and conditions as json, the text the agent sent,
// instead of jsonb. They are only ever read whole, into the answers of the
// inventory, and PostgreSQL writes out a jsonb value by walking it, while
// json is written out as stored (docs/performance.md). No query looks inside them,
// so nothing is lost; labels, which searches and indexes read, stay jsonb.
// fleet_clusters_v1 keeps its column types by casting capacity and
// allocatable back to jsonb. The change rewrites managed_clusters under an
// ACCESS EXCLUSIVE lock (docs/operations.md, docs/performance.md).
func migration202611300013InventoryDocuments() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202611300013",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(inventoryDocumentsAs("json") + clusterViewV1SQL("mc.capacity::jsonb", "mc.allocatable::jsonb")).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(inventoryDocumentsAs("jsonb") + clusterViewV1SQL("mc.capacity", "mc.allocatable")).Error
		},
	}
}

// inventoryDocumentsAs drops fleet_clusters_v1, which reads two of the
// columns, and gives the four document columns of managed_clusters the type
// typ, json or jsonb, keeping their defaults.
func inventoryDocumentsAs(typ string) string {
	sql := "DROP VIEW fleet_clusters_v1;\nALTER TABLE managed_clusters"
	for i, c := range []struct{ column, empty string }{
		{"claims", "{}"}, {"capacity", "{}"}, {"allocatable", "{}"}, {"conditions", "[]"},
	} {
		if i > 0 {
			sql += ","
		}
		sql += fmt.Sprintf("\n\tALTER COLUMN %[1]s DROP DEFAULT, ALTER COLUMN %[1]s TYPE %[2]s USING %[1]s::%[2]s, ALTER COLUMN %[1]s SET DEFAULT '%[3]s'",
			c.column, typ, c.empty)
	}
	return sql + ";\n"
}
