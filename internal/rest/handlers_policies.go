package rest

import (
	"net/http"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// handlePolicyCreate creates a configuration policy for the caller's organisation.
func (s *Server) handlePolicyCreate(w http.ResponseWriter, r *http.Request) error {
	var body public.PolicyCreate
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	if err := s.services.PolicySchema.ValidatePolicy(body.Policy); err != nil {
		return err
	}
	p, err := s.services.Policies.CreatePolicy(r.Context(), caller(r), fleet.PolicyCreate{
		Zone: deref(body.Zone), Body: body.Policy, Selector: labelSelector(body.Placement.LabelSelector)})
	if err != nil {
		return err
	}
	out := s.presentPolicy(p)
	w.Header().Set("Location", out.Href)
	w.Header().Set("ETag", fleet.ETag(p.Generation))
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// handlePolicyList serves a page of the caller's organisation's policies.
func (s *Server) handlePolicyList(w http.ResponseWriter, r *http.Request) error {
	q := listQuery(r)
	policies, total, err := s.services.Policies.ListPolicies(r.Context(), caller(r).OrgID, q)
	if err != nil {
		return err
	}
	items := make([]public.Policy, len(policies))
	for i, p := range policies {
		items[i] = s.presentPolicy(p)
	}
	writeJSON(w, http.StatusOK, public.PolicyList{Kind: public.PolicyListKindPolicyList, Page: q.Page, Size: len(items), Total: total, Items: items})
	return nil
}

// handlePolicyGet serves one of the caller's organisation's policies.
func (s *Server) handlePolicyGet(w http.ResponseWriter, r *http.Request) error {
	p, err := s.services.Policies.FindPolicy(r.Context(), caller(r).OrgID, pathParam(r, "id"))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", fleet.ETag(p.Generation))
	writeJSON(w, http.StatusOK, s.presentPolicy(p))
	return nil
}

// handlePolicyUpdate replaces a policy's body and placement under If-Match.
func (s *Server) handlePolicyUpdate(w http.ResponseWriter, r *http.Request) error {
	match, err := ifMatch(r)
	if err != nil {
		return err
	}
	var body public.PolicyUpdate
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	if err := s.services.PolicySchema.ValidatePolicy(body.Policy); err != nil {
		return err
	}
	p, err := s.services.Policies.UpdatePolicy(r.Context(), s.permit(r, fleet.ActionPoliciesUpdate), caller(r).OrgID, pathParam(r, "id"), match,
		fleet.PolicyUpdate{Body: body.Policy, Selector: labelSelector(body.Placement.LabelSelector)})
	if err != nil {
		return err
	}
	w.Header().Set("ETag", fleet.ETag(p.Generation))
	writeJSON(w, http.StatusOK, s.presentPolicy(p))
	return nil
}

// patchRetries bounds how often a PATCH without If-Match reads the policy
// again after another change got in between its read and its write.
const patchRetries = 3

// handlePolicyPatch changes what the body gives of a policy, as PATCH
// /clusters/{id} does: each field given replaces the current one. Without
// If-Match the change applies to the policy as it is when written: the
// update is conditional on the generation read, and read again when another
// change got in between.
func (s *Server) handlePolicyPatch(w http.ResponseWriter, r *http.Request) error {
	match, err := ifMatch(r)
	if err != nil {
		return err
	}
	var body public.PolicyPatch
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	if body.Policy != nil {
		if err := s.services.PolicySchema.ValidatePolicy(*body.Policy); err != nil {
			return err
		}
	}
	org, id := caller(r).OrgID, pathParam(r, "id")
	for attempt := 0; ; attempt++ {
		current, err := s.services.Policies.FindPolicy(r.Context(), org, id)
		if err != nil {
			return err
		}
		update := fleet.PolicyUpdate{Body: current.Body, Selector: current.Selector}
		if body.Policy != nil {
			update.Body = *body.Policy
		}
		if body.Placement != nil {
			update.Selector = labelSelector(body.Placement.LabelSelector)
		}
		expected := match
		if expected == nil {
			expected = &current.Generation
		}
		p, err := s.services.Policies.UpdatePolicy(r.Context(), s.permit(r, fleet.ActionPoliciesUpdate), org, id, expected, update)
		if match == nil && attempt < patchRetries && fleet.ErrorCodeOf(err) == fleet.CodePreconditionFailed {
			continue
		}
		if err != nil {
			return err
		}
		w.Header().Set("ETag", fleet.ETag(p.Generation))
		writeJSON(w, http.StatusOK, s.presentPolicy(p))
		return nil
	}
}

// handlePolicyDelete deletes a policy under If-Match.
func (s *Server) handlePolicyDelete(w http.ResponseWriter, r *http.Request) error {
	match, err := ifMatch(r)
	if err != nil {
		return err
	}
	if err := s.services.Policies.DeletePolicy(r.Context(), s.permit(r, fleet.ActionPoliciesDelete), caller(r).OrgID, pathParam(r, "id"), match); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handlePolicyComplianceList serves a page of a policy's per-cluster compliance.
func (s *Server) handlePolicyComplianceList(w http.ResponseWriter, r *http.Request) error {
	q := listQuery(r)
	rows, total, err := s.services.Policies.ListCompliance(r.Context(), caller(r).OrgID, pathParam(r, "id"), q)
	if err != nil {
		return err
	}
	items := make([]public.ClusterCompliance, len(rows))
	for i, c := range rows {
		items[i] = public.ClusterCompliance{Kind: public.ClusterComplianceKindClusterCompliance, PolicyId: c.PolicyID,
			ClusterName: c.ClusterName, Hub: hubRef(c.Hub), ManagedClusterId: strPtr(c.ManagedClusterID),
			RegistrationId: strPtr(c.RegistrationID), State: public.ComplianceState(c.State), UpdatedAt: c.UpdatedAt}
	}
	writeJSON(w, http.StatusOK, public.ClusterComplianceList{Kind: public.ClusterComplianceListKindClusterComplianceList,
		Page: q.Page, Size: len(items), Total: total, Items: items})
	return nil
}

// handleComplianceSummaryGet counts clusters per compliance state, hub and
// zone, for one policy or all of the caller's organisation's.
func (s *Server) handleComplianceSummaryGet(w http.ResponseWriter, r *http.Request) error {
	policyID := r.URL.Query().Get("policy_id")
	sum, err := s.services.Policies.ComplianceSummary(r.Context(), caller(r).OrgID, policyID)
	if err != nil {
		return err
	}
	out := public.ComplianceSummary{Kind: public.ComplianceSummaryKindComplianceSummary, PolicyId: strPtr(policyID),
		Counts: complianceCounts(sum.ComplianceCounts)}
	out.Hubs = make([]struct {
		Counts public.ComplianceCounts `json:"counts"`
		Hub    public.HubRef           `json:"hub"`
	}, len(sum.Hubs))
	for i, h := range sum.Hubs {
		out.Hubs[i].Counts, out.Hubs[i].Hub = complianceCounts(h.ComplianceCounts), hubRef(h.Hub)
	}
	out.Zones = make([]struct {
		Counts public.ComplianceCounts `json:"counts"`
		Zone   string                  `json:"zone"`
	}, len(sum.Zones))
	for i, z := range sum.Zones {
		out.Zones[i].Counts, out.Zones[i].Zone = complianceCounts(z.ComplianceCounts), z.Zone
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// presentPolicy renders a policy for the public API.
func (s *Server) presentPolicy(p fleet.Policy) public.Policy {
	return public.Policy{Kind: public.PolicyKindPolicy, Id: p.ID, Href: s.cfg.BasePath + "/policies/" + p.ID, Name: p.Name,
		Zone: p.Zone, Policy: p.Body, Placement: public.PolicyPlacement{LabelSelector: presentSelector(p.Selector)},
		Generation: p.Generation, HubCount: p.Hubs, CreatedBy: strPtr(p.CreatedBy), CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt,
		DeliveryFailures: presentDeliveryFailures(p.DeliveryFailures)}
}

// presentDeliveryFailures lists the hubs that refused a policy.
func presentDeliveryFailures(in []fleet.PolicyDeliveryFailure) *[]public.PolicyDeliveryFailure {
	out := make([]public.PolicyDeliveryFailure, len(in))
	for i, f := range in {
		out[i] = public.PolicyDeliveryFailure{HubId: f.HubID, Reason: f.Reason, Message: f.Message, Since: f.Since}
	}
	return &out
}

// labelSelector reads the API's label selector.
func labelSelector(in public.LabelSelector) fleet.LabelSelector {
	out := fleet.LabelSelector{}
	if in.MatchLabels != nil {
		out.MatchLabels = *in.MatchLabels
	}
	if in.MatchExpressions != nil {
		for _, e := range *in.MatchExpressions {
			req := fleet.LabelSelectorRequirement{Key: e.Key, Operator: fleet.SelectorOperator(e.Operator)}
			if e.Values != nil {
				req.Values = *e.Values
			}
			out.MatchExpressions = append(out.MatchExpressions, req)
		}
	}
	return out
}

// presentSelector renders a label selector for the API.
func presentSelector(in fleet.LabelSelector) public.LabelSelector {
	out := public.LabelSelector{}
	if len(in.MatchLabels) > 0 {
		ml := in.MatchLabels
		out.MatchLabels = &ml
	}
	if len(in.MatchExpressions) > 0 {
		exprs := make([]struct {
			Key      string                                       `json:"key"`
			Operator public.LabelSelectorMatchExpressionsOperator `json:"operator"`
			Values   *[]string                                    `json:"values,omitempty"`
		}, len(in.MatchExpressions))
		for i, e := range in.MatchExpressions {
			exprs[i].Key, exprs[i].Operator = e.Key, public.LabelSelectorMatchExpressionsOperator(e.Operator)
			if len(e.Values) > 0 {
				values := e.Values
				exprs[i].Values = &values
			}
		}
		out.MatchExpressions = &exprs
	}
	return out
}

func complianceCounts(c fleet.ComplianceCounts) public.ComplianceCounts {
	return public.ComplianceCounts{Compliant: c.Compliant, NonCompliant: c.NonCompliant, Pending: c.Pending}
}

func hubRef(h fleet.HubRef) public.HubRef {
	return public.HubRef{Id: h.ID, Name: h.Name, Zone: h.Zone, Region: h.Region}
}
