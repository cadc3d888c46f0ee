package migrations

import (
	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// migration202611300009Policies creates the configuration policies, the
// hubs each is resolved to, and the per-cluster compliance the hubs report.
// Compliance is kept by a trigger on resources: when a hub's root Policy of
// a configuration policy is written (its status lists each cluster's
// compliance), the policy's rows of that hub are brought in line in the
// same transaction, so they can never disagree with the stored Policy.
func migration202611300009Policies() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "202611300009",
		Migrate: func(tx *gorm.DB) error {
			return tx.Exec(`
CREATE TABLE policies (
	id          text PRIMARY KEY,
	org_id      text NOT NULL,
	zone        text NOT NULL,
	name        text NOT NULL,
	body        jsonb NOT NULL,
	selector    jsonb NOT NULL DEFAULT '{}',
	generation  bigint NOT NULL DEFAULT 1,
	created_by  text NOT NULL DEFAULT '',
	created_at  timestamptz NOT NULL DEFAULT now(),
	updated_at  timestamptz NOT NULL DEFAULT now(),
	resolved_at timestamptz,
	deleted_at  timestamptz
);
CREATE UNIQUE INDEX policies_org_name ON policies (org_id, name) WHERE deleted_at IS NULL;
CREATE INDEX policies_live ON policies (org_id, created_at, id) WHERE deleted_at IS NULL;
-- The hubs a policy is placed on: those with at least one of the policy
-- organisation's clusters matching its selector in its zone.
CREATE TABLE policy_hubs (
	policy_id text NOT NULL REFERENCES policies (id) ON DELETE CASCADE,
	hub_id    text NOT NULL REFERENCES hubs (id) ON DELETE CASCADE,
	PRIMARY KEY (policy_id, hub_id)
);
CREATE INDEX policy_hubs_hub ON policy_hubs (hub_id);
CREATE TABLE policy_compliance (
	policy_id    text NOT NULL REFERENCES policies (id) ON DELETE CASCADE,
	hub_id       text NOT NULL REFERENCES hubs (id) ON DELETE CASCADE,
	cluster_name text NOT NULL,
	zone         text NOT NULL,
	state        text NOT NULL CHECK (state IN ('Compliant', 'NonCompliant', 'Pending')),
	updated_at   timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (policy_id, hub_id, cluster_name)
);
CREATE INDEX policy_compliance_hub ON policy_compliance (hub_id);

-- Brings a policy's compliance on one hub in line with its root Policy as
-- the hub's agent reported it. Replicated policies (in the clusters'
-- namespaces), policies of other fleet managers or hubs sharing the API
-- server, and ids of no live policy placed on that hub (an agent reporting
-- for a policy it was not given) are left alone.
CREATE FUNCTION policy_compliance_sync() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	pid text := NEW.labels ->> 'fleet-manager.io/policy-id';
	statuses jsonb := NEW.body #> '{status,status}';
BEGIN
	IF pid IS NULL OR NEW.labels ->> 'policy.open-cluster-management.io/root-policy' IS NOT NULL
		OR NEW.labels ->> 'fleet-manager.io/hub-id' IS DISTINCT FROM NEW.hub_id
		OR NOT EXISTS (SELECT 1 FROM policy_hubs ph JOIN policies p ON p.id = ph.policy_id
			WHERE ph.policy_id = pid AND ph.hub_id = NEW.hub_id AND p.deleted_at IS NULL) THEN
		RETURN NULL;
	END IF;
	IF NEW.deleted_at IS NOT NULL OR jsonb_typeof(statuses) IS DISTINCT FROM 'array' THEN
		statuses := '[]';
	END IF;
	DELETE FROM policy_compliance c WHERE c.policy_id = pid AND c.hub_id = NEW.hub_id
		AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(statuses) e WHERE e ->> 'clustername' = c.cluster_name);
	INSERT INTO policy_compliance AS c (policy_id, hub_id, cluster_name, zone, state)
	SELECT DISTINCT ON (s.clustername) pid, NEW.hub_id, s.clustername, NEW.zone,
		CASE s.compliant WHEN 'Compliant' THEN 'Compliant' WHEN 'NonCompliant' THEN 'NonCompliant' ELSE 'Pending' END
	FROM jsonb_to_recordset(statuses) AS s(clustername text, compliant text)
	WHERE coalesce(s.clustername, '') <> ''
	ORDER BY s.clustername
	ON CONFLICT (policy_id, hub_id, cluster_name) DO UPDATE SET state = excluded.state, zone = excluded.zone, updated_at = now()
		WHERE c.state <> excluded.state OR c.zone <> excluded.zone;
	RETURN NULL;
END $$;
CREATE TRIGGER resources_policy_compliance AFTER INSERT OR UPDATE ON resources FOR EACH ROW
	WHEN (NEW.kind = 'Policy' AND NEW.api_group = 'policy.open-cluster-management.io')
	EXECUTE FUNCTION policy_compliance_sync();
`).Error
		},
		Rollback: func(tx *gorm.DB) error {
			return tx.Exec(`
DROP TRIGGER resources_policy_compliance ON resources;
DROP FUNCTION policy_compliance_sync();
DROP TABLE policy_compliance, policy_hubs, policies;
`).Error
		},
	}
}
