package ocmtest_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/fleetmanager/fleet-manager/internal/hub/ocmtest"
	"github.com/fleetmanager/fleet-manager/internal/hubkind"
)

// leasePeriod is the shared clusters' lease duration, which is also how
// often their agents renew the lease.
const leasePeriod = 5 * time.Second

// TestSharedJoins joins two clusters through klusterlets on the one managed
// cluster JoinShared shares: each registration agent keeps its own hub
// credentials, so both clusters become joined and available under their
// own names with the claim set on the shared cluster; one leaves, and its
// lease is no longer renewed while the other's is.
func TestSharedJoins(t *testing.T) {
	ocm := ocmtest.Start(t)
	hubDyn := ocm.Hub().NewDynamicFor(t)
	ctx := t.Context()
	suffix := randomSuffix(t)
	if err := ocm.SetClaim("version.openshift.io", "4.17.3"); err != nil {
		t.Fatalf("SetClaim: %v", err)
	}
	names := []string{"shared-a-" + suffix, "shared-b-" + suffix}
	clusters := map[string]*ocmtest.Cluster{}
	for _, name := range names {
		createAccepted(t, hubDyn, name)
		c, err := ocm.JoinShared(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Leave)
		clusters[name] = c
	}
	for _, name := range names {
		waitFor(t, ocm, clusters[name], name+" accepted, joined and available with the shared claim", func() error {
			status, err := managedClusterStatus(t, hubDyn, name)
			if err != nil {
				return err
			}
			for _, c := range []string{"HubAcceptedManagedCluster", "ManagedClusterJoined", "ManagedClusterConditionAvailable"} {
				if !meta.IsStatusConditionTrue(status.Status.Conditions, c) {
					return fmt.Errorf("condition %s not True in %+v", c, status.Status.Conditions)
				}
			}
			if !slices.Contains(status.Status.ClusterClaims, claimStatus{Name: "version.openshift.io", Value: "4.17.3"}) {
				return fmt.Errorf("cluster claims %+v lack version.openshift.io", status.Status.ClusterClaims)
			}
			return nil
		})
	}

	// The first leaves: its lease stops, the second's goes on.
	clusters[names[0]].Leave()
	leases := ocm.Hub().NewClientsetFor(t).CoordinationV1()
	renewed := func(name string) (metav1.MicroTime, error) {
		l, err := leases.Leases(name).Get(ctx, "managed-cluster-lease", metav1.GetOptions{})
		if err != nil {
			return metav1.MicroTime{}, err
		}
		if l.Spec.RenewTime == nil {
			return metav1.MicroTime{}, fmt.Errorf("lease of %s never renewed", name)
		}
		return *l.Spec.RenewTime, nil
	}
	leftAt, err := renewed(names[0])
	if err != nil {
		t.Fatal(err)
	}
	stayedAt, err := renewed(names[1])
	if err != nil {
		t.Fatal(err)
	}
	// Two renewals of the remaining cluster's lease: a period in which the
	// cluster that left would have renewed its own at least once.
	for range 2 {
		waitFor(t, ocm, clusters[names[1]], "the remaining cluster's lease renewed", func() error {
			now, err := renewed(names[1])
			if err != nil {
				return err
			}
			if !now.After(stayedAt.Time) {
				return fmt.Errorf("lease of %s still renewed at %s", names[1], now)
			}
			stayedAt = now
			return nil
		})
	}
	if now, err := renewed(names[0]); err != nil || !now.Equal(&leftAt) {
		t.Errorf("lease of the cluster that left: %v (was %v), %v; want it no longer renewed", now, leftAt, err)
	}
}

// createAccepted creates a ManagedCluster with hubAcceptsClient true, as
// an import does.
func createAccepted(t *testing.T, dyn dynamic.Interface, name string) {
	t.Helper()
	mc := hubkind.ManagedCluster.New("", name)
	if err := unstructured.SetNestedField(mc.Object, true, "spec", "hubAcceptsClient"); err != nil {
		t.Fatal(err)
	}
	// A short lease: the agent renews it every period.
	if err := unstructured.SetNestedField(mc.Object, int64(leasePeriod.Seconds()), "spec", "leaseDurationSeconds"); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(hubkind.ManagedCluster.GVR()).Create(t.Context(), mc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ManagedCluster %s: %v", name, err)
	}
}

func managedClusterStatus(t *testing.T, dyn dynamic.Interface, name string) (clusterStatus, error) {
	got, err := dyn.Resource(hubkind.ManagedCluster.GVR()).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		return clusterStatus{}, err
	}
	var status clusterStatus
	err = runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, &status)
	return status, err
}
