package rest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/mux"
	"github.com/rs/cors"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/openapi"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// Services are the domain services the handlers call.
type Services struct {
	Registrations fleet.RegistrationService
	Hubs          fleet.HubService
	Agents        fleet.AgentService
	Inventory     fleet.InventoryService
	Resources     fleet.ResourceService
	Revisions     fleet.RevisionWaiter
	// Feed and InventoryChanges serve the inventory's change feed.
	Feed             fleet.ChangeFeed
	InventoryChanges fleet.InventoryWaiter
	// Policies keeps configuration policies; PolicySchema checks their bodies.
	Policies     fleet.PolicyService
	PolicySchema fleet.PolicyValidator
	// Blueprints keeps blueprints; Pools keeps capacity pools and reservations.
	Blueprints fleet.BlueprintService
	Pools      fleet.PoolService
	// Metrics answers the user-facing metrics endpoints.
	Metrics fleet.UserMetrics
	// DNSAdmin onboards DNS zones and naming policies; DNSRecords keeps the
	// services' records. Without both, the DNS operations answer 404.
	DNSAdmin   fleet.DNSAdmin
	DNSRecords fleet.DNSRecords
	// Authorizer is the one decision point every handler asks.
	Authorizer fleet.Authorizer
}

// Server is the API server's handler set.
type Server struct {
	cfg    Config
	logger *slog.Logger
	auth   fleet.Authenticator
	// roles turns a token's roles into the subject the Authorizer decides about.
	roles    fleet.RoleMap
	metrics  *HTTPMetrics
	services Services
	specs    []*spec
	public   *spec
	// collections links the public spec's top-level collections, for GET {base}.
	collections []public.APILink
	// ingest bounds the inventory batches read at once: each holds a large
	// body in memory, and a hundred agents resyncing together must not
	// multiply that.
	ingest chan struct{}
	// batches bounds the batch creates read at once, for the same reason.
	batches chan struct{}
	// desired bounds the desired sets read and written at once: each reads a
	// hub's registrations and renders them, and a hundred agents fetching at
	// once would hold every pooled connection.
	desired chan struct{}
	// draining is closed when the server starts shutting down, so waiting
	// long-polls answer at once instead of holding the drain.
	draining  chan struct{}
	drainOnce sync.Once
	// builders keeps the buffers of the answers of clusters written, for the
	// next ones: a page's answer is large (docs/performance.md).
	builders sync.Pool
}

// NewServer loads the embedded specifications and returns the API server.
func NewServer(ctx context.Context, cfg Config, logger *slog.Logger, auth fleet.Authenticator, metrics *HTTPMetrics, services Services) (*Server, error) {
	s := &Server{cfg: cfg, logger: logger.With("component", "api"), auth: auth, metrics: metrics, services: services,
		ingest: make(chan struct{}, cfg.AgentIngestConcurrency), batches: make(chan struct{}, cfg.RegistrationBatchConcurrency),
		desired: make(chan struct{}, cfg.AgentDesiredConcurrency), draining: make(chan struct{})}
	s.builders.New = newJSONBuilder
	s.roles = cfg.OrgRoles
	s.roles.FleetAdmin, s.roles.FleetViewer = cfg.AdminRoles, cfg.AdminReadRoles
	for _, file := range openapi.All() {
		sp, err := loadSpec(ctx, openapi.Specs, file, cfg.BasePath)
		if err != nil {
			return nil, err
		}
		s.specs = append(s.specs, sp)
	}
	s.public = s.specs[0]
	s.collections = apiCollections(s.public, cfg.BasePath)
	return s, nil
}

// handlers maps each operation id of the specs to its handler. An operation
// without a handler, or a handler without an operation, fails at start.
func (s *Server) handlers() map[string]handlerFunc {
	return map[string]handlerFunc{
		"getAPIVersion":          s.handleAPIVersionGet,
		"getOpenAPI":             s.handleOpenAPIGet,
		"listErrors":             s.handleErrorList,
		"getError":               s.handleErrorGet,
		"getCurrentUser":         s.handleCurrentUserGet,
		"listClusters":           s.can(fleet.ActionClustersList, "cluster", s.handleClusterList),
		"createCluster":          s.handleClusterCreate, // the store decides, with the org's live registrations
		"createClusters":         s.handleClusterBatchCreate,
		"getCluster":             s.can(fleet.ActionClustersGet, "cluster", s.handleClusterGet),
		"updateCluster":          s.handleClusterUpdate,
		"deleteCluster":          s.handleClusterDelete,
		"listHubs":               s.can(fleet.ActionHubsList, "hub", s.handleHubList),
		"createHub":              s.can(fleet.ActionHubsCreate, "hub", s.handleHubCreate),
		"getHub":                 s.can(fleet.ActionHubsGet, "hub", s.handleHubGet),
		"updateHub":              s.can(fleet.ActionHubsUpdate, "hub", s.handleHubUpdate),
		"deleteHub":              s.can(fleet.ActionHubsDelete, "hub", s.handleHubDelete),
		"cordonHub":              s.can(fleet.ActionHubsCordon, "hub", s.handleHubCordon(true)),
		"uncordonHub":            s.can(fleet.ActionHubsCordon, "hub", s.handleHubCordon(false)),
		"putHubStatus":           s.can(fleet.ActionAgentStatus, "agent_hub", s.handleHubStatusPut),
		"getHubDesired":          s.can(fleet.ActionAgentDesired, "agent_hub", s.handleHubDesiredGet),
		"postHubInventory":       s.can(fleet.ActionAgentInventory, "agent_hub", s.handleHubInventoryPost),
		"getHubResourceKinds":    s.can(fleet.ActionAgentResources, "agent_hub", s.handleHubResourceKindsGet),
		"postHubResources":       s.can(fleet.ActionAgentResources, "agent_hub", s.handleHubResourcesPost),
		"listResources":          s.can(fleet.ActionResourcesList, "resource", s.handleResourceList),
		"listResourceChanges":    s.can(fleet.ActionResourcesWatch, "resource", s.handleResourceChangeList),
		"getResource":            s.can(fleet.ActionResourcesGet, "resource", s.handleResourceGet),
		"putRegistrationsStatus": s.can(fleet.ActionAgentRegistrations, "agent_hub", s.handleRegistrationsStatusPut),
		"getClusterImport":       s.handleClusterImportGet,
		"listManagedClusters":    s.can(fleet.ActionInventoryList, "managed_cluster", s.handleManagedClusterList),
		"getManagedCluster":      s.can(fleet.ActionInventoryGet, "managed_cluster", s.handleManagedClusterGet),

		// The inventory's change feed.
		"listManagedClusterChanges": s.can(fleet.ActionInventoryWatch, "managed_cluster", s.handleManagedClusterChangeList),

		// Configuration policies.
		"listPolicies":         s.can(fleet.ActionPoliciesList, "policy", s.handlePolicyList),
		"createPolicy":         s.can(fleet.ActionPoliciesCreate, "policy", s.handlePolicyCreate),
		"getPolicy":            s.can(fleet.ActionPoliciesGet, "policy", s.handlePolicyGet),
		"updatePolicy":         s.handlePolicyUpdate,
		"patchPolicy":          s.handlePolicyPatch,
		"deletePolicy":         s.handlePolicyDelete,
		"listPolicyCompliance": s.can(fleet.ActionPoliciesCompliance, "policy", s.handlePolicyComplianceList),
		"getComplianceSummary": s.can(fleet.ActionComplianceSummary, "policy", s.handleComplianceSummaryGet),

		// Blueprints, capacity pools and reservations.
		"listBlueprints":           s.can(fleet.ActionBlueprintsList, "blueprint", s.handleBlueprintList),
		"createBlueprint":          s.can(fleet.ActionBlueprintsCreate, "blueprint", s.handleBlueprintCreate),
		"getBlueprint":             s.can(fleet.ActionBlueprintsGet, "blueprint", s.handleBlueprintGet),
		"deleteBlueprint":          s.handleBlueprintDelete,
		"listBlueprintVersions":    s.can(fleet.ActionBlueprintsGet, "blueprint", s.handleBlueprintVersionList),
		"createBlueprintVersion":   s.handleBlueprintVersionCreate,
		"getBlueprintVersion":      s.can(fleet.ActionBlueprintsGet, "blueprint", s.handleBlueprintVersionGet),
		"deleteBlueprintVersion":   s.handleBlueprintVersionDelete,
		"listCapacityPools":        s.can(fleet.ActionPoolsList, "pool", s.handlePoolList),
		"createCapacityPool":       s.can(fleet.ActionPoolsCreate, "pool", s.handlePoolCreate),
		"getCapacityPool":          s.can(fleet.ActionPoolsGet, "pool", s.handlePoolGet),
		"updateCapacityPool":       s.handlePoolUpdate,
		"deleteCapacityPool":       s.handlePoolDelete,
		"listCapacityPoolClusters": s.can(fleet.ActionPoolsGet, "pool", s.handlePoolClusterList),
		"listCapacityPoolEvents":   s.can(fleet.ActionPoolsGet, "pool", s.handlePoolEventList),
		"listReservations":         s.can(fleet.ActionReservationsList, "reservation", s.handleReservationList),
		"createReservation":        s.can(fleet.ActionReservationsCreate, "reservation", s.handleReservationCreate),
		"getReservation":           s.can(fleet.ActionReservationsGet, "reservation", s.handleReservationGet),
		"deleteReservation":        s.handleReservationDelete,

		// DNS zones and naming policies (admin), services' records (public);
		// the record handlers check the service's writers (handlers_dns.go).
		"listDNSZones":            s.can(fleet.ActionDNSZonesList, "dns_zone", s.withDNS(s.handleDNSZoneList)),
		"createDNSZone":           s.can(fleet.ActionDNSZonesCreate, "dns_zone", s.withDNS(s.handleDNSZoneCreate)),
		"getDNSZone":              s.can(fleet.ActionDNSZonesGet, "dns_zone", s.withDNS(s.handleDNSZoneGet)),
		"updateDNSZone":           s.can(fleet.ActionDNSZonesUpdate, "dns_zone", s.withDNS(s.handleDNSZoneUpdate)),
		"deleteDNSZone":           s.can(fleet.ActionDNSZonesDelete, "dns_zone", s.withDNS(s.handleDNSZoneDelete)),
		"listDNSServices":         s.can(fleet.ActionDNSZonesList, "dns_service", s.withDNS(s.handleDNSServiceList)),
		"createDNSService":        s.can(fleet.ActionDNSZonesCreate, "dns_service", s.withDNS(s.handleDNSServiceCreate)),
		"getDNSService":           s.can(fleet.ActionDNSZonesGet, "dns_service", s.withDNS(s.handleDNSServiceGet)),
		"updateDNSService":        s.can(fleet.ActionDNSZonesUpdate, "dns_service", s.withDNS(s.handleDNSServiceUpdate)),
		"deleteDNSService":        s.can(fleet.ActionDNSZonesDelete, "dns_service", s.withDNS(s.handleDNSServiceDelete)),
		"listWritableDNSServices": s.can(fleet.ActionDNSRecordsList, "dns_record", s.withDNS(s.handleWritableDNSServiceList)),
		"listDNSRecords":          s.can(fleet.ActionDNSRecordsList, "dns_record", s.withDNS(s.handleDNSRecordList)),
		"createDNSRecord":         s.can(fleet.ActionDNSRecordsCreate, "dns_record", s.withDNS(s.handleDNSRecordCreate)),
		"getDNSRecord":            s.can(fleet.ActionDNSRecordsGet, "dns_record", s.withDNS(s.handleDNSRecordGet)),
		"updateDNSRecord":         s.withDNS(s.handleDNSRecordUpdate),
		"deleteDNSRecord":         s.withDNS(s.handleDNSRecordDelete),

		// Organisations' capacity-pool limits (admin).
		"getOrganizationLimits":    s.can(fleet.ActionOrgLimitsGet, "org_limits", s.handleOrgLimitsGet),
		"updateOrganizationLimits": s.can(fleet.ActionOrgLimitsUpdate, "org_limits", s.handleOrgLimitsUpdate),

		// User-facing metrics; the store scopes each read to the caller's clusters.
		"queryMetrics":                    s.can(fleet.ActionUserMetricsRead, "cluster", s.handleMetricsQuery(false)),
		"queryMetricsForm":                s.can(fleet.ActionUserMetricsRead, "cluster", s.handleMetricsQuery(false)),
		"queryMetricsPrometheus":          s.can(fleet.ActionUserMetricsRead, "cluster", s.handleMetricsQuery(false)),
		"queryMetricsPrometheusForm":      s.can(fleet.ActionUserMetricsRead, "cluster", s.handleMetricsQuery(false)),
		"queryMetricsRange":               s.can(fleet.ActionUserMetricsRead, "cluster", s.handleMetricsQuery(true)),
		"queryMetricsRangeForm":           s.can(fleet.ActionUserMetricsRead, "cluster", s.handleMetricsQuery(true)),
		"queryMetricsRangePrometheus":     s.can(fleet.ActionUserMetricsRead, "cluster", s.handleMetricsQuery(true)),
		"queryMetricsRangePrometheusForm": s.can(fleet.ActionUserMetricsRead, "cluster", s.handleMetricsQuery(true)),
		"getMetricsText":                  s.can(fleet.ActionUserMetricsRead, "cluster", s.handleMetricsText),
		"getClusterMetricsText":           s.can(fleet.ActionUserMetricsRead, "cluster", s.handleClusterMetricsText),
	}
}

// Handler returns the API's http.Handler: every operation of the specs routed
// under the base path, wrapped in observability and CORS.
func (s *Server) Handler() (http.Handler, error) {
	router := mux.NewRouter()
	router.Use(recordRoute)
	router.NotFoundHandler = s.adapt(func(http.ResponseWriter, *http.Request) error {
		return fleet.Errorf(fleet.CodeNotFound, "no such path")
	})
	router.MethodNotAllowedHandler = s.adapt(func(_ http.ResponseWriter, r *http.Request) error {
		return fleet.Errorf(fleet.CodeMethodNotAllowed, "method %s is not allowed here", r.Method)
	})
	handlers := s.handlers()
	used := map[string]bool{}
	for _, op := range s.operations() {
		id := op.route.Operation.OperationID
		h, ok := handlers[id]
		if !ok {
			return nil, fmt.Errorf("Handler(): operation %s of %s has no handler", id, op.spec.file)
		}
		used[id] = true
		public := slices.Contains(s.cfg.PublicPaths, op.route.Path)
		h = s.authenticate(op, public, s.limitIngest(op, s.validate(op, h)))
		router.Handle(s.cfg.BasePath+op.route.Path, s.adapt(withOperation(id, s.withDeadline(op, h)))).Methods(op.route.Method)
		if op.route.Path == "/" {
			// GET {base} answers as GET {base}/ does, and the path above
			// it the API's versions, as OCM services do.
			router.Handle(s.cfg.BasePath, s.adapt(withOperation(id, s.withDeadline(op, h)))).Methods(op.route.Method)
			meta := s.authenticate(op, public, s.handleAPIMetadataGet)
			router.Handle(path.Dir(s.cfg.BasePath), s.adapt(withOperation("getAPIMetadata", s.withDeadline(op, meta)))).Methods(http.MethodGet)
		}
	}
	for id := range handlers {
		if !used[id] {
			return nil, fmt.Errorf("Handler(): handler %s has no operation in the specifications", id)
		}
	}
	for _, p := range s.cfg.PublicPaths {
		if !s.hasPath(p) {
			return nil, fmt.Errorf("--auth-public-paths: %s is not a path of the API", p)
		}
	}
	return s.withObservability(s.withCORS(s.withCompression(router))), nil
}

// Drain ends the waiting long-polls; http.Server.RegisterOnShutdown calls it.
func (s *Server) Drain() { s.drainOnce.Do(func() { close(s.draining) }) }

// withOperation names the request's operation (its operationId in the
// specification, never the caller's X-Operation-ID) in its context, so every
// statement it sends names it to the database.
func withOperation(operationID string, next handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		return next(w, r.WithContext(fleet.NewContextWithOperation(r.Context(), operationID)))
	}
}

// withDeadline gives the request its deadline: RequestTimeout, plus the
// longest wait for a long-poll (an operation with a `wait` parameter). What
// fails for want of time past it is unavailability (503), whatever the error:
// the database's own errors say so already, a hub's or an issuer's may not.
// An ordinary operation's waits on the database are bounded shorter still
// (--db-wait-timeout, fleet.BoundedDatabaseWait); the long-polls and the
// batch endpoints, whose statements may rightly take longer, keep this
// deadline alone.
func (s *Server) withDeadline(op operation, next handlerFunc) handlerFunc {
	timeout := s.cfg.RequestTimeout
	longPoll := op.route.Operation.Parameters.GetByInAndName("query", "wait") != nil
	if longPoll {
		timeout += max(s.cfg.AgentMaxWait, s.cfg.FeedMaxWait)
	}
	bounded := !longPoll && !isBatch(op)
	return func(w http.ResponseWriter, r *http.Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		if bounded {
			ctx = fleet.NewContextWithBoundedDatabaseWait(ctx)
		}
		err := next(w, r.WithContext(ctx))
		if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && fleet.ErrorCodeOf(err) == fleet.CodeInternal {
			return &fleet.Error{Code: fleet.CodeUnavailable, Message: "the request did not finish within its deadline; retry later", Err: err}
		}
		return err
	}
}

// isBatch reports whether op stores a batch: a batch create, or an agent's
// inventory, resources or registrations' status, hundreds of rows at once.
func isBatch(op operation) bool {
	switch op.route.Operation.OperationID {
	case "postHubInventory", "postHubResources", "putRegistrationsStatus":
		return true
	}
	return isBatchCreate(op)
}

// limitIngest lets at most AgentIngestConcurrency inventory batches, and at
// most RegistrationBatchConcurrency batch creates, be read and stored at once;
// the others wait (their bodies unread) until a slot frees or their request
// ends.
func (s *Server) limitIngest(op operation, next handlerFunc) handlerFunc {
	slots, what := s.ingest, "an inventory slot"
	switch id := op.route.Operation.OperationID; {
	case id == "postHubInventory" || id == "postHubResources":
	case isBatchCreate(op):
		slots, what = s.batches, "a batch slot"
	default:
		return next
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			return next(w, r)
		case <-r.Context().Done():
			return fleet.Errorf(fleet.CodeUnavailable, "the request ended while waiting for %s", what)
		}
	}
}

// operations lists the operations of every spec.
func (s *Server) operations() []operation {
	var ops []operation
	for _, sp := range s.specs {
		ops = append(ops, sp.operations()...)
	}
	return ops
}

// hasPath reports whether a spec has path.
func (s *Server) hasPath(path string) bool {
	for _, sp := range s.specs {
		if sp.doc.Paths.Value(path) != nil {
			return true
		}
	}
	return false
}

// adapt turns a handlerFunc into an http.Handler that writes its error.
func (s *Server) adapt(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// withCORS answers preflight requests and adds the CORS headers, when origins
// are configured.
func (s *Server) withCORS(next http.Handler) http.Handler {
	c := s.cfg.CORS
	if len(c.AllowedOrigins) == 0 {
		return next
	}
	return cors.New(cors.Options{
		AllowedOrigins:   c.AllowedOrigins,
		AllowedMethods:   c.AllowedMethods,
		AllowedHeaders:   c.AllowedHeaders,
		ExposedHeaders:   c.ExposedHeaders,
		AllowCredentials: c.AllowCredentials,
		MaxAge:           int(c.MaxAge / time.Second),
	}).Handler(next)
}
