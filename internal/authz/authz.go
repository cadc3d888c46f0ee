// Package authz is the fleet manager's one decision point: can this subject
// do this action on this resource? The answer is a Rego policy evaluated in
// process by Open Policy Agent; the default policy is embedded, a fork
// replaces it with --authz-policy-file.
package authz

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// DefaultPolicyFile is the embedded policy's name.
const DefaultPolicyFile = "policy/fleet.rego"

// entry is the rule every policy defines; its package is fleet.authz.
const (
	entryPackage = "data.fleet.authz"
	entryRule    = "decision"
)

//go:embed policy/fleet.rego
var policies embed.FS

// DefaultPolicy returns the embedded policy's text.
func DefaultPolicy() string {
	b, _ := policies.ReadFile(DefaultPolicyFile) // embedded: always there
	return string(b)
}

// Authorizer implements fleet.Authorizer on a prepared Rego query.
type Authorizer struct {
	query   rego.PreparedEvalQuery
	cache   *decisionCache
	logger  *slog.Logger
	metrics *Metrics
	// readsLive: a decision may depend on the request's LiveRegistrations.
	readsLive bool
	// readsUsage: a decision may depend on the request's OrgUsage where
	// its OrgLimits are 0.
	readsUsage bool
}

// New compiles the policy (cfg.PolicyFile, else the embedded one) with the
// configuration as its data, and prepares the query once. Errors name
// --authz-policy-file when the policy file does not compile or lacks the rule
// fleet.authz.decision.
func New(ctx context.Context, cfg Config, logger *slog.Logger, metrics *Metrics) (*Authorizer, error) {
	name, src := DefaultPolicyFile, DefaultPolicy()
	if cfg.PolicyFile != "" {
		b, err := os.ReadFile(cfg.PolicyFile)
		if err != nil {
			return nil, fmt.Errorf("--authz-policy-file: %w", err)
		}
		name, src = cfg.PolicyFile, string(b)
	}
	module, err := ast.ParseModuleWithOpts(name, src, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return nil, fmt.Errorf("--authz-policy-file %s: %w", name, err)
	}
	if err := checkEntry(module); err != nil {
		return nil, fmt.Errorf("--authz-policy-file %s: %w", name, err)
	}
	data, err := json.Marshal(policyData(cfg.Preflight, cfg.UserMetricsOrgs))
	if err != nil {
		return nil, fmt.Errorf("authz.New: %w", err)
	}
	query, err := rego.New(
		rego.Query(entryPackage+"."+entryRule),
		rego.ParsedModule(module),
		rego.Store(inmem.NewFromReader(bytesReader(data))),
	).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("--authz-policy-file %s: %w", name, err)
	}
	if metrics == nil {
		metrics = newMetrics("")
	}
	a := &Authorizer{query: query, logger: logger.With("component", "authz"), metrics: metrics,
		readsLive: readsField(module, liveRegistrationsField)}
	// The embedded policy compares the usage with the limits only where
	// they are above 0; a policy file may read it anywhere.
	a.readsUsage = cfg.PolicyFile != "" && readsField(module, orgUsageField)
	if cfg.PolicyFile == "" {
		// The embedded policy reads the count in its quota rule only, which
		// applies when the quota is above 0 (TestDefaultPolicyReadsLiveRegistrationsForAQuotaOnly).
		a.readsLive = a.readsLive && cfg.Preflight.MaxRegistrationsPerOrg > 0
	}
	if calls := nondeterministic(module); len(calls) > 0 {
		a.logger.Info("the policy calls nondeterministic built-ins: every decision is evaluated", "builtins", calls)
	} else {
		a.cache = newDecisionCache(cfg.DecisionCacheSize)
	}
	return a, nil
}

// checkEntry refuses a module that is not package fleet.authz or has no
// rule decision.
func checkEntry(m *ast.Module) error {
	if m.Package.Path.String() != entryPackage {
		return fmt.Errorf("the policy's package is %s, want fleet.authz", m.Package.Path)
	}
	for _, r := range m.Rules {
		if r.Head.Ref().String() == entryRule {
			return nil
		}
	}
	return fmt.Errorf("the policy has no rule %s", entryRule)
}

// Authorize evaluates the policy for req. Errors: the code the policy
// decided (CodeActionForbidden when it names none of the catalogue's),
// CodeInternal when it cannot be evaluated.
func (a *Authorizer) Authorize(ctx context.Context, req fleet.AuthzRequest) error {
	start := time.Now()
	err, cached := a.cache.get(req)
	if !cached {
		err = a.decide(ctx, req)
		a.cache.put(req, err)
	}
	a.metrics.observe(req.Action, err, time.Since(start), cached)
	if err != nil && fleet.ErrorCodeOf(err) != fleet.CodeInternal {
		a.logger.Info("authorization denied", "action", req.Action, "subject_kind", req.Subject.Kind,
			"subject_id", req.Subject.ID, "org", req.Subject.OrgID, "org_role", req.Subject.OrgRole,
			"resource_kind", req.Resource.Kind, "resource_id", req.Resource.ID, "code", int(fleet.ErrorCodeOf(err)), "reason", err.Error())
	}
	return err
}

func (a *Authorizer) decide(ctx context.Context, req fleet.AuthzRequest) error {
	rs, err := a.query.Eval(ctx, rego.EvalParsedInput(input(req)))
	if err != nil {
		return fmt.Errorf("Authorize(%s): %w", req.Action, err)
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return fleet.Errorf(fleet.CodeActionForbidden, "%s is not allowed: the policy gave no decision", req.Action)
	}
	d, ok := rs[0].Expressions[0].Value.(map[string]any)
	if !ok {
		return fmt.Errorf("Authorize(%s): the decision is not an object", req.Action)
	}
	if allow, _ := d["allow"].(bool); allow {
		return nil
	}
	reason, _ := d["reason"].(string)
	if reason == "" {
		reason = req.Action + " is not allowed"
	}
	code := fleet.CodeActionForbidden
	if n, ok := d["code"].(json.Number); ok {
		if c, err := n.Int64(); err == nil {
			if _, known := fleet.LookupErrorCode(fleet.ErrorCode(c)); known && c != int64(fleet.CodeInternal) {
				code = fleet.ErrorCode(c)
			}
		}
	}
	return &fleet.Error{Code: code, Message: reason}
}

// input is the request as the policy's input, built as an AST value: no
// JSON round trip on the request path.
func input(req fleet.AuthzRequest) ast.Value {
	s, r := req.Subject, req.Resource
	return ast.NewObject(
		ast.Item(ast.StringTerm("subject"), ast.ObjectTerm(
			ast.Item(ast.StringTerm("kind"), ast.StringTerm(s.Kind)),
			ast.Item(ast.StringTerm("id"), ast.StringTerm(s.ID)),
			ast.Item(ast.StringTerm("username"), ast.StringTerm(s.Username)),
			ast.Item(ast.StringTerm("org_id"), ast.StringTerm(s.OrgID)),
			ast.Item(ast.StringTerm("fleet_admin"), ast.BooleanTerm(s.FleetAdmin)),
			ast.Item(ast.StringTerm("fleet_viewer"), ast.BooleanTerm(s.FleetViewer)),
			ast.Item(ast.StringTerm("org_role"), ast.StringTerm(s.OrgRole)),
		)),
		ast.Item(ast.StringTerm("action"), ast.StringTerm(req.Action)),
		ast.Item(ast.StringTerm("resource"), ast.ObjectTerm(
			ast.Item(ast.StringTerm("kind"), ast.StringTerm(r.Kind)),
			ast.Item(ast.StringTerm("id"), ast.StringTerm(r.ID)),
			ast.Item(ast.StringTerm("org_id"), ast.StringTerm(r.OrgID)),
			ast.Item(ast.StringTerm("created_by"), ast.StringTerm(r.CreatedBy)),
		)),
		ast.Item(ast.StringTerm("product"), ast.StringTerm(req.Product)),
		ast.Item(ast.StringTerm("live_registrations"), ast.IntNumberTerm(req.LiveRegistrations)),
		ast.Item(ast.StringTerm("org_limits"), ast.ObjectTerm(
			ast.Item(ast.StringTerm("pools"), ast.IntNumberTerm(req.OrgLimits.Pools)),
			ast.Item(ast.StringTerm("pool_clusters"), ast.IntNumberTerm(req.OrgLimits.PoolClusters)),
			ast.Item(ast.StringTerm("reserved_units"), ast.IntNumberTerm(req.OrgLimits.ReservedUnits)),
		)),
		ast.Item(ast.StringTerm(orgUsageField), ast.ObjectTerm(
			ast.Item(ast.StringTerm("pools"), ast.IntNumberTerm(req.OrgUsage.Pools)),
			ast.Item(ast.StringTerm("pool_clusters"), ast.IntNumberTerm(req.OrgUsage.PoolClusters)),
			ast.Item(ast.StringTerm("reserved_units"), ast.IntNumberTerm(req.OrgUsage.ReservedUnits)),
		)),
		ast.Item(ast.StringTerm("units"), ast.IntNumberTerm(req.Units)),
	)
}

// MustDefault returns the embedded policy with the default configuration and
// no registered metrics, for a store or server built outside the
// composition root. It panics if the embedded policy does not compile, which
// TestDefaultPolicy rules out.
func MustDefault() *Authorizer {
	a, err := New(context.Background(), DefaultConfig(), slog.New(slog.DiscardHandler), nil)
	if err != nil {
		panic(err)
	}
	return a
}
