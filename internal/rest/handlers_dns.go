package rest

import (
	"net/http"
	"slices"
	"strings"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// The public DNS API. Records belong to the organisation that created them
// and every read is scoped to the caller's organisation: an organisation
// that is not one of a service's writers has no records there, so it lists
// none and finds none (404). Changes need both the action (the Authorizer,
// dns_records:*) and a writer of the service (DNSService.MayWrite), else
// 403 code 33; a writer removed from a service still reads its records. An
// unknown service is 404 for every operation, and so is a record the caller
// cannot read, whatever the change asked.

// handleWritableDNSServiceList serves the services whose records the caller
// may write, by name. Every policy is read and filtered here: MayWrite is
// the one rule of who writes, and the policies are few (one per service
// team).
func (s *Server) handleWritableDNSServiceList(w http.ResponseWriter, r *http.Request) error {
	page, size := pageParams(r)
	sub := s.subject(r)
	var mine []fleet.DNSService
	for p, seen := 1, 0; p <= fleet.MaxPage; p++ {
		list, total, err := s.services.DNSAdmin.ListDNSServices(r.Context(), fleet.ListQuery{Page: p})
		if err != nil {
			return err
		}
		for _, svc := range list {
			if svc.MayWrite(sub) {
				mine = append(mine, svc)
			}
		}
		if seen += len(list); len(list) == 0 || seen >= total {
			break
		}
	}
	slices.SortFunc(mine, func(a, b fleet.DNSService) int { return strings.Compare(a.Name, b.Name) })
	from := min((page-1)*size, len(mine))
	items := make([]public.DNSService, 0, min(size, len(mine)-from))
	for _, svc := range mine[from:min(from+size, len(mine))] {
		items = append(items, s.presentWritableDNSService(svc))
	}
	writeJSON(w, http.StatusOK, public.DNSServiceList{Kind: public.DNSServiceListKindDNSServiceList, Page: page, Size: len(items),
		Total: len(mine), Items: items})
	return nil
}

// presentWritableDNSService renders a policy for one of its writers: how
// names are made and what records may hold, nothing of the other writers.
func (s *Server) presentWritableDNSService(svc fleet.DNSService) public.DNSService {
	return public.DNSService{Kind: public.DNSServiceKindDNSService, Name: svc.Name, RecordsHref: s.dnsRecordsHref(svc.Name),
		Subtree: svc.Subtree(), NameTemplate: svc.NameTemplate, RecordTypes: castStrings[public.DNSRecordType](svc.RecordTypes),
		MinTtl: svc.MinTTL, MaxTtl: svc.MaxTTL, DefaultTtl: svc.DefaultTTL}
}

func (s *Server) dnsRecordsHref(service string) string {
	return s.cfg.BasePath + "/dns_services/" + service + "/records"
}

// dnsService returns the path's service; an unknown one is 404.
func (s *Server) dnsService(r *http.Request) (fleet.DNSService, error) {
	return s.services.DNSRecords.FindDNSServiceByName(r.Context(), pathParam(r, "service_name"))
}

// handleDNSRecordCreate creates an instance's record: 201, or 200 with the
// live record when the same one was asked for before.
func (s *Server) handleDNSRecordCreate(w http.ResponseWriter, r *http.Request) error {
	var body public.DNSRecordCreate
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	service := pathParam(r, "service_name")
	rec, created, err := s.services.DNSRecords.CreateDNSRecord(r.Context(), caller(r), service, fleet.DNSRecordCreate{
		Instance: body.Instance, Type: fleet.DNSRecordType(derefOr(body.Type)), TTL: derefOr(body.Ttl),
		Targets: derefOr(body.Targets), ClusterID: deref(body.ClusterId),
	})
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	out := s.presentDNSRecord(service, rec)
	w.Header().Set("Location", out.Href)
	w.Header().Set("ETag", fleet.ETag(rec.Generation))
	writeJSON(w, status, out)
	return nil
}

func (s *Server) handleDNSRecordList(w http.ResponseWriter, r *http.Request) error {
	q := listQuery(r)
	svc, err := s.dnsService(r)
	if err != nil {
		return err
	}
	list, total, err := s.services.DNSRecords.ListDNSRecords(r.Context(), caller(r).OrgID, svc, q)
	if err != nil {
		return err
	}
	items := make([]public.DNSRecord, len(list))
	for i, rec := range list {
		items[i] = s.presentDNSRecord(svc.Name, rec)
	}
	writeJSON(w, http.StatusOK, public.DNSRecordList{Kind: public.DNSRecordListKindDNSRecordList, Page: q.Page, Size: len(items),
		Total: total, Items: items})
	return nil
}

func (s *Server) handleDNSRecordGet(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.dnsService(r)
	if err != nil {
		return err
	}
	rec, err := s.services.DNSRecords.FindDNSRecord(r.Context(), caller(r).OrgID, svc, pathParam(r, "record_id"))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", fleet.ETag(rec.Generation))
	writeJSON(w, http.StatusOK, s.presentDNSRecord(svc.Name, rec))
	return nil
}

func (s *Server) handleDNSRecordUpdate(w http.ResponseWriter, r *http.Request) error {
	match, err := ifMatch(r)
	if err != nil {
		return err
	}
	var body public.DNSRecordPatch
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	service := pathParam(r, "service_name")
	update := fleet.DNSRecordUpdate{TTL: body.Ttl, Targets: body.Targets, ClusterID: body.ClusterId}
	if body.Type != nil {
		t := fleet.DNSRecordType(*body.Type)
		update.Type = &t
	}
	rec, err := s.services.DNSRecords.UpdateDNSRecord(r.Context(), s.permit(r, fleet.ActionDNSRecordsUpdate), caller(r).OrgID, service,
		pathParam(r, "record_id"), match, update)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", fleet.ETag(rec.Generation))
	writeJSON(w, http.StatusOK, s.presentDNSRecord(service, rec))
	return nil
}

// handleDNSRecordDelete starts a record's removal: dns_mgr removes the name
// at the provider, then the record goes.
func (s *Server) handleDNSRecordDelete(w http.ResponseWriter, r *http.Request) error {
	match, err := ifMatch(r)
	if err != nil {
		return err
	}
	err = s.services.DNSRecords.RequestDNSRecordDeletion(r.Context(), s.permit(r, fleet.ActionDNSRecordsDelete), caller(r).OrgID,
		pathParam(r, "service_name"), pathParam(r, "record_id"), match)
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// presentDNSRecord renders a record of the service named service.
func (s *Server) presentDNSRecord(service string, rec fleet.DNSRecord) public.DNSRecord {
	return public.DNSRecord{Kind: public.DNSRecordKindDNSRecord, Id: rec.ID, Href: s.dnsRecordsHref(service) + "/" + rec.ID,
		Service: service, Instance: rec.Instance, Name: rec.Name, Type: public.DNSRecordType(rec.Type), Ttl: rec.TTL,
		Targets: castStrings[string](rec.Targets), ClusterId: strPtr(rec.ClusterID), Values: castStrings[string](rec.Values),
		Conditions: presentConditions(rec.Conditions), Phase: public.DNSRecordPhase(rec.Phase()), Generation: rec.Generation,
		CreatedBy: strPtr(rec.CreatedBy), CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt, DeletionRequestedAt: rec.DeletionRequestedAt}
}
