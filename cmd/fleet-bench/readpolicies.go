package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/authz"
	domain "github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
)

// benchEmptyOrg has no cluster anywhere: its policies reach no hub, which a
// resolver that asks every hub finds out at the highest cost.
const benchEmptyOrg = "bench-empty-org"

// policyPasses is how many resolver passes are timed.
const policyPasses = 3

// policyResolve is what the policy resolver cost on the loaded inventory.
type policyResolve struct {
	policies int             // live policies, half benchOrg's, half benchEmptyOrg's
	hubs     int             // hubs benchOrg's policies reached
	passes   []time.Duration // ResolvePolicies, each
}

// measurePolicyResolve creates --policies configuration policies through the
// store, in this process on the benchmark database (benchOrg's selecting
// env=prod, benchEmptyOrg's the same), then times whole resolver passes:
// what the policy resolver costs the database after every burst of
// inventory writes (at most every --policy-resolve-interval).
func measurePolicyResolve(ctx context.Context, o options, db *benchDB) (policyResolve, error) {
	var res policyResolve
	if o.Policies == 0 {
		return res, nil
	}
	cfg := postgres.DefaultConfig()
	cfg.Host, cfg.Port, cfg.User, cfg.Password, cfg.Name = o.DB.Host, o.DB.Port, o.DB.User, o.DB.Password, db.name
	cfg.MaxOpenConns = 2
	pg, err := postgres.Open(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return res, fmt.Errorf("measurePolicyResolve: %w", err)
	}
	defer pg.Close()
	store := postgres.NewStore(pg, nil, domain.SystemClock{}, postgres.DefaultStoreConfig(), authz.MustDefault())
	for i := range o.Policies {
		org := []string{benchOrg, benchEmptyOrg}[i%2]
		p, err := store.CreatePolicy(ctx, domain.Identity{OrgID: org, Username: "bench"}, domain.PolicyCreate{Zone: benchZone,
			Body: map[string]any{"apiVersion": domain.PolicyAPIVersion, "kind": domain.PolicyKind,
				"metadata": map[string]any{"name": fmt.Sprintf("bench-policy-%d-%d", i, time.Now().UnixNano())},
				"spec":     map[string]any{"remediationAction": "inform", "disabled": false, "policy-templates": []any{}}},
			Selector: domain.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}})
		if err != nil {
			return res, fmt.Errorf("measurePolicyResolve: %w", err)
		}
		if org == benchOrg {
			res.hubs = p.Hubs
		}
	}
	if err := pg.Gorm.WithContext(ctx).Raw(`SELECT count(*) FROM policies WHERE deleted_at IS NULL`).Scan(&res.policies).Error; err != nil {
		return res, err
	}
	for range policyPasses {
		start := time.Now()
		if _, err := store.ResolvePolicies(ctx); err != nil {
			return res, fmt.Errorf("measurePolicyResolve: %w", err)
		}
		res.passes = append(res.passes, time.Since(start))
	}
	return res, nil
}

// print writes the resolver's figures.
func (p policyResolve) print(out io.Writer) {
	if len(p.passes) == 0 {
		return
	}
	best := p.passes[0]
	for _, d := range p.passes {
		best = min(best, d)
	}
	fmt.Fprintf(out, "policy resolver: %d live policies (half %s's, reaching %d hubs; half %s's, which has no cluster):\n",
		p.policies, benchOrg, p.hubs, benchEmptyOrg)
	fmt.Fprintf(out, "                 a whole pass %s at best of %d (%v), %.1f ms a policy\n\n",
		best.Round(time.Millisecond), len(p.passes), p.passes, float64(best.Microseconds())/1000/float64(p.policies))
}
