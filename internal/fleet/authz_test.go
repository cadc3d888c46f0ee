package fleet_test

import (
	"testing"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

func TestRoleMapSubject(t *testing.T) {
	t.Parallel()
	m := fleet.RoleMap{FleetAdmin: []string{"fleet-admin"}, FleetViewer: []string{"fleet-admin", "fleet-viewer"},
		OrgAdmin: []string{"org-admin"}, OrgMember: []string{"org-member"}, OrgViewer: []string{"org-viewer"},
		DefaultOrgRole: fleet.OrgRoleMember, ServiceAccountPrefix: "service-account-"}
	tests := []struct {
		name string
		id   fleet.Identity
		ok   bool
		want fleet.Subject
	}{
		{"no token", fleet.Identity{}, false, fleet.Subject{Kind: fleet.SubjectAnonymous, OrgRole: fleet.OrgRoleNone}},
		{"org admin", fleet.Identity{Subject: "s1", Username: "alice", OrgID: "o", Roles: []string{"org-admin", "org-viewer"}}, true,
			fleet.Subject{Kind: fleet.SubjectUser, ID: "s1", Username: "alice", OrgID: "o", OrgRole: fleet.OrgRoleAdmin}},
		{"org member", fleet.Identity{Username: "bob", OrgID: "o", Roles: []string{"org-member"}}, true,
			fleet.Subject{Kind: fleet.SubjectUser, ID: "bob", Username: "bob", OrgID: "o", OrgRole: fleet.OrgRoleMember}},
		{"org viewer", fleet.Identity{Username: "carol", OrgID: "o", Roles: []string{"org-viewer"}}, true,
			fleet.Subject{Kind: fleet.SubjectUser, ID: "carol", Username: "carol", OrgID: "o", OrgRole: fleet.OrgRoleViewer}},
		{"no org role: the default", fleet.Identity{Username: "dan", OrgID: "o"}, true,
			fleet.Subject{Kind: fleet.SubjectUser, ID: "dan", Username: "dan", OrgID: "o", OrgRole: fleet.OrgRoleMember}},
		{"no org: no org role", fleet.Identity{Username: "erin", Roles: []string{"org-admin"}}, true,
			fleet.Subject{Kind: fleet.SubjectUser, ID: "erin", Username: "erin", OrgRole: fleet.OrgRoleNone}},
		{"fleet admin", fleet.Identity{Username: "sre", OrgID: "sre", Roles: []string{"fleet-admin"}}, true,
			fleet.Subject{Kind: fleet.SubjectUser, ID: "sre", Username: "sre", OrgID: "sre", FleetAdmin: true, FleetViewer: true, OrgRole: fleet.OrgRoleMember}},
		{"fleet viewer", fleet.Identity{Username: "ro", OrgID: "sre", Roles: []string{"fleet-viewer"}}, true,
			fleet.Subject{Kind: fleet.SubjectUser, ID: "ro", Username: "ro", OrgID: "sre", FleetViewer: true, OrgRole: fleet.OrgRoleMember}},
		{"service account", fleet.Identity{Username: "service-account-ci", OrgID: "o"}, true,
			fleet.Subject{Kind: fleet.SubjectServiceAccount, ID: "service-account-ci", Username: "service-account-ci", OrgID: "o", OrgRole: fleet.OrgRoleMember}},
		{"agent", fleet.Identity{Username: "agent", AgentID: "hub-1-agent"}, true,
			fleet.Subject{Kind: fleet.SubjectAgent, ID: "hub-1-agent", Username: "agent", OrgRole: fleet.OrgRoleNone}},
		{"agent claim with an org: a user", fleet.Identity{Username: "u", OrgID: "o", AgentID: "a"}, true,
			fleet.Subject{Kind: fleet.SubjectUser, ID: "u", Username: "u", OrgID: "o", OrgRole: fleet.OrgRoleMember}},
	}
	for _, tt := range tests {
		if got := m.Subject(tt.id, tt.ok); got != tt.want {
			t.Errorf("%s: Subject(%+v) = %+v, want %+v", tt.name, tt.id, got, tt.want)
		}
	}
}

// fleetCode returns the error code of err, 0 for nil.
func fleetCode(err error) fleet.ErrorCode {
	if err == nil {
		return 0
	}
	return fleet.ErrorCodeOf(err)
}
