package governancetest

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/fleetmanager/fleet-manager/internal/hubkind"
)

// ReplicatedName is the name the propagator gives a root policy's replica
// in each selected cluster's namespace.
func ReplicatedName(rootNamespace, rootName string) string {
	return rootNamespace + "." + rootName
}

// SetReplicatedCompliance writes a replicated policy's status on the hub as
// the governance-policy-framework-addon's status-sync does once the managed
// cluster has evaluated the policy's templates: the overall compliance and,
// for each template, its compliance with one history entry
// (open-cluster-management.io/governance-policy-propagator api/v1's
// PolicyStatus, the replicated-policy fields). It is a stand-in: the addon's
// module is not served by the Go module proxy, so nothing here evaluates a
// template; the state is the test's. The propagator then aggregates it into
// the root policy's status.
func SetReplicatedCompliance(ctx context.Context, dyn dynamic.Interface, cluster, rootNamespace, rootName, state, message string) error {
	// The propagator updates the replica too (its spec, labels and
	// annotations): a conflict means another read.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		return setReplicatedCompliance(ctx, dyn, cluster, rootNamespace, rootName, state, message)
	})
}

func setReplicatedCompliance(ctx context.Context, dyn dynamic.Interface, cluster, rootNamespace, rootName, state, message string) error {
	policies := dyn.Resource(hubkind.Policy.GVR()).Namespace(cluster)
	replica, err := policies.Get(ctx, ReplicatedName(rootNamespace, rootName), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("replicated policy: %w", err)
	}
	templates, _, err := unstructured.NestedSlice(replica.Object, "spec", "policy-templates")
	if err != nil {
		return fmt.Errorf("replicated policy: %w", err)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	details := make([]any, 0, len(templates))
	for _, tmpl := range templates {
		name, _, _ := unstructured.NestedString(tmpl.(map[string]any), "objectDefinition", "metadata", "name")
		details = append(details, map[string]any{
			"templateMeta": map[string]any{"name": name},
			"compliant":    state,
			"history": []any{map[string]any{
				"eventName":     ReplicatedName(rootNamespace, rootName) + "." + name,
				"lastTimestamp": now,
				"message":       state + "; " + message,
			}},
		})
	}
	replica.Object["status"] = map[string]any{"compliant": state, "details": details}
	_, err = policies.UpdateStatus(ctx, replica, metav1.UpdateOptions{})
	return err
}
