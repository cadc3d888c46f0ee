package rest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// TestBatchCreatesWaitForASlot checks that at most
// RegistrationBatchConcurrency batch creates run at once, that one waiting
// for a slot ends with its request (503, code Unavailable), and that the
// inventory's slots are apart from the batches'.
func TestBatchCreatesWaitForASlot(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	s := &Server{ingest: make(chan struct{}, 1), batches: make(chan struct{}, 1)}
	op := func(id string) operation {
		return operation{route: routers.Route{Operation: &openapi3.Operation{OperationID: id}}}
	}
	release, running := make(chan struct{}), make(chan struct{})
	held := s.limitIngest(op(batchCreateOperation), func(http.ResponseWriter, *http.Request) error {
		close(running)
		<-release
		return nil
	})
	done := make(chan error, 1)
	go func() {
		done <- held(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/clusters:batch", nil))
	}()
	<-running

	calls := 0
	count := func(http.ResponseWriter, *http.Request) error { calls++; return nil }
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	waiting := httptest.NewRequest(http.MethodPost, "/clusters:batch", nil).WithContext(ctx)
	err := s.limitIngest(op(batchCreateOperation), count)(httptest.NewRecorder(), waiting)
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeUnavailable), "a second batch waits for the slot until its request ends")
	g.Expect(calls).To(gomega.BeZero())

	g.Expect(s.limitIngest(op("postHubInventory"), count)(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/inventory", nil))).To(gomega.Succeed())
	g.Expect(s.limitIngest(op("createCluster"), count)(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/clusters", nil))).To(gomega.Succeed())
	g.Expect(calls).To(gomega.Equal(2), "an inventory batch and a single create take no batch slot")

	close(release)
	g.Expect(<-done).To(gomega.Succeed())
	g.Expect(s.limitIngest(op(batchCreateOperation), count)(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/clusters:batch", nil))).To(gomega.Succeed())
	g.Expect(calls).To(gomega.Equal(3), "the slot is free again once the first batch ended")
}

// TestDesiredSetsWaitForASlot checks that a desired set is read only in one
// of AgentDesiredConcurrency slots: with every slot taken, an agent's read
// waits, reads nothing, and ends with its request (code Unavailable).
func TestDesiredSetsWaitForASlot(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	s := &Server{desired: make(chan struct{}, 1)} // no services: a read would panic
	s.desired <- struct{}{}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	r := httptest.NewRequest(http.MethodGet, "/agent-hubs/h/desired", nil).WithContext(ctx)
	err := s.writeDesired(httptest.NewRecorder(), r, "h", "agent", 0)
	g.Expect(fleet.ErrorCodeOf(err)).To(gomega.Equal(fleet.CodeUnavailable))
	g.Expect(s.desired).To(gomega.HaveLen(1), "the slot taken before is still taken, no other")
}
