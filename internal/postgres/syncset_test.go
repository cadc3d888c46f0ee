package postgres_test

import (
	"context"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// TestSyncSetSource checks what SyncSet deliveries read from the store: a
// hub's credentials opened, and a registration's objects with its import
// credentials, as the agent would get them.
func TestSyncSetSource(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	store, db := newStoreOn(t, nil)
	hub, err := store.CreateHub(ctx, fleet.HubCreate{Name: "hive-1", Zone: "eu", Region: "eu-west-1", DeliveryMode: fleet.DeliverySyncSetHive,
		Capacity: 5, Hive: &fleet.HiveTarget{Namespace: "hive-1", ClusterDeployment: "hive-1"},
		Credentials: map[string]string{fleet.CredentialHiveKubeconfig: "kubeconfig of hive"}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(hub.Hive).To(gomega.Equal(&fleet.HiveTarget{Namespace: "hive-1", ClusterDeployment: "hive-1"}))

	creds, err := store.HubCredentials(ctx, hub.ID)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(creds).To(gomega.Equal(map[string]string{fleet.CredentialHiveKubeconfig: "kubeconfig of hive"}))
	_, err = store.HubCredentials(ctx, "no-such-hub")
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeNotFound))

	caller := fleet.Identity{OrgID: "org-s", Username: "sam"}
	reg, _, err := store.CreateRegistration(ctx, caller, fleet.RegistrationCreate{Name: "c1", Zone: "eu", Product: fleet.ProductOCP,
		Credentials: &fleet.ImportCredentials{Kubeconfig: "kubeconfig of c1"}}, "")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	objects, err := store.RegistrationObjects(ctx, hub.ID, reg)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(objects).To(gomega.Equal(fleet.DesiredObjects(reg, hub.ID, &fleet.ImportCredentials{Kubeconfig: "kubeconfig of c1"})))
	_, err = store.RegistrationObjects(ctx, hub.ID, fleet.Registration{ID: "no-such-registration"})
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeNotFound))

	// Moving the hub to its agent makes its registrations due at once.
	g.Expect(db.Gorm.Exec(`UPDATE registrations SET hub_id = ?, next_attempt_at = now() + interval '1 hour' WHERE id = ?`, hub.ID, reg.ID).Error).To(gomega.Succeed())
	mode, identity := fleet.DeliveryAgent, "hive-1-agent"
	capacity := 6
	_, err = store.UpdateHub(ctx, hub.ID, nil, fleet.HubUpdate{Capacity: &capacity})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(countRows(t, db, `SELECT count(*) FROM registrations WHERE id = ? AND next_attempt_at <= now()`, reg.ID)).To(gomega.Equal(0),
		"a capacity change requeued the hub's registrations")
	moved, err := store.UpdateHub(ctx, hub.ID, nil, fleet.HubUpdate{DeliveryMode: &mode, AgentIdentity: &identity})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(moved.Hive).NotTo(gomega.BeNil(), "the Hive target is kept for the hand-off")
	g.Expect(countRows(t, db, `SELECT count(*) FROM registrations WHERE id = ? AND next_attempt_at <= now()`, reg.ID)).To(gomega.Equal(1))
}
