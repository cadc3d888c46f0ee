package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202611300014PolicyDelivery records where the configuration
// policies were last delivered on the hubs (--policy-namespace,
// --policy-cluster-set), one row, so that a start with other flags moves
// the desired sets that hold policies (Store.SyncPolicyDelivery).
func migration202611300014PolicyDelivery() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202611300014",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
CREATE TABLE policy_delivery (
	singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
	namespace   text NOT NULL,
	cluster_set text NOT NULL,
	updated_at  timestamptz NOT NULL DEFAULT now()
);
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`DROP TABLE policy_delivery`).Error
		},
	}
}
