package fleet

// Preflight is what a registration passes before it is accepted, as the
// authorization policy reads it (data.fleet.config). Every list is
// configuration; an empty allow list allows everyone.
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
