package fleet

import "slices"

// Preflight is the set of checks a registration passes before it is
// accepted. Every list is configuration; an empty allow list allows everyone.
type Preflight struct {
	// MaxRegistrationsPerOrg caps an org's live registrations; 0 means no cap.
	MaxRegistrationsPerOrg int
	AllowedOrgs            []string
	DeniedOrgs             []string
	AllowedUsers           []string
	DeniedUsers            []string
	// AcceptedProducts lists the products accepted; empty accepts all.
	AcceptedProducts []Product
}

// CheckCaller refuses organisations and users the lists exclude. Errors:
// CodeOrgNotAllowed, CodeUserNotAllowed.
func (p Preflight) CheckCaller(caller Identity) error {
	if caller.OrgID == "" {
		return Errorf(CodeOrgNotAllowed, "the token carries no organisation")
	}
	if slices.Contains(p.DeniedOrgs, caller.OrgID) || (len(p.AllowedOrgs) > 0 && !slices.Contains(p.AllowedOrgs, caller.OrgID)) {
		return Errorf(CodeOrgNotAllowed, "organisation %s may not register clusters", caller.OrgID)
	}
	if slices.Contains(p.DeniedUsers, caller.Username) || (len(p.AllowedUsers) > 0 && !slices.Contains(p.AllowedUsers, caller.Username)) {
		return Errorf(CodeUserNotAllowed, "user %s may not register clusters", caller.Username)
	}
	return nil
}

// CheckProduct refuses products the service does not accept. Errors: CodeProductNotAccepted.
func (p Preflight) CheckProduct(product Product) error {
	if len(p.AcceptedProducts) > 0 && !slices.Contains(p.AcceptedProducts, product) {
		return Errorf(CodeProductNotAccepted, "product %s is not accepted; accepted: %v", product, p.AcceptedProducts)
	}
	return nil
}

// CheckQuota refuses a registration past the org's quota, given how many live
// registrations it has. Errors: CodeQuotaExceeded.
func (p Preflight) CheckQuota(org string, live int) error {
	if p.MaxRegistrationsPerOrg > 0 && live >= p.MaxRegistrationsPerOrg {
		return Errorf(CodeQuotaExceeded, "organisation %s has %d live registrations, its quota is %d", org, live, p.MaxRegistrationsPerOrg)
	}
	return nil
}
