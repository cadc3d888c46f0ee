package postgres_test

import (
	"context"
	"testing"

	"github.com/onsi/gomega"
)

// TestPurgeIdempotencyKeysInBatches checks that the purge deletes every
// expired key, more than one statement's batch of them, and no other.
func TestPurgeIdempotencyKeysInBatches(t *testing.T) {
	g := gomega.NewWithT(t)
	store, db := newStoreOn(t, nil)
	exec := func(sql string) {
		t.Helper()
		g.Expect(db.Gorm.Exec(sql).Error).To(gomega.Succeed(), sql)
	}
	exec(`INSERT INTO registrations (id, org_id, owner, name, zone, product, phase)
		SELECT 'r-' || i, 'org-a', 'u', 'c-' || i, 'eu', 'ocp', 'accepted' FROM generate_series(1, 12000) AS i`)
	exec(`INSERT INTO idempotency_keys (org_id, key, request_hash, registration_id, created_at)
		SELECT 'org-a', 'k-' || i, 'h', 'r-' || i, CASE WHEN i <= 11000 THEN now() - interval '25 hours' ELSE now() END
		FROM generate_series(1, 12000) AS i`)

	n, err := store.PurgeIdempotencyKeys(context.Background())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(n).To(gomega.Equal(11000))
	var left, young int64
	g.Expect(db.Gorm.Raw(`SELECT count(*), count(*) FILTER (WHERE created_at > now() - interval '1 hour') FROM idempotency_keys`).
		Row().Scan(&left, &young)).To(gomega.Succeed())
	g.Expect([]int64{left, young}).To(gomega.Equal([]int64{1000, 1000}), "the keys within their time to live stay")

	n, err = store.PurgeIdempotencyKeys(context.Background())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(n).To(gomega.BeZero())
}
