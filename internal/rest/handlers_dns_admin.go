package rest

import (
	"net/http"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
)

// withDNS answers 404 for the DNS operations of a deployment that does not
// manage DNS (no DNSAdmin or DNSRecords service), instead of failing on a
// nil service.
func (s *Server) withDNS(next handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if s.services.DNSAdmin == nil || s.services.DNSRecords == nil {
			return fleet.Errorf(fleet.CodeNotFound, "this deployment does not manage DNS records")
		}
		return next(w, r)
	}
}

func (s *Server) handleDNSZoneCreate(w http.ResponseWriter, r *http.Request) error {
	var body admin.DNSZoneCreate
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	z, err := s.services.DNSAdmin.CreateDNSZone(r.Context(), caller(r), fleet.DNSZoneCreate{
		Name: body.Name, Provider: fleet.DNSProviderKind(body.Provider), RFC2136: rfc2136Settings(body.Rfc2136),
		Route53: route53Settings(body.Route53), Nameservers: derefOr(body.Nameservers), Credentials: dnsCredentials(body.Credentials),
	})
	if err != nil {
		return err
	}
	out := s.presentDNSZone(z)
	w.Header().Set("Location", out.Href)
	w.Header().Set("ETag", fleet.ETag(z.Generation))
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (s *Server) handleDNSZoneList(w http.ResponseWriter, r *http.Request) error {
	q := listQuery(r)
	list, total, err := s.services.DNSAdmin.ListDNSZones(r.Context(), q)
	if err != nil {
		return err
	}
	items := make([]admin.DNSZone, len(list))
	for i, z := range list {
		items[i] = s.presentDNSZone(z)
	}
	writeJSON(w, http.StatusOK, admin.DNSZoneList{Kind: admin.DNSZoneListKindDNSZoneList, Page: q.Page, Size: len(items), Total: total, Items: items})
	return nil
}

func (s *Server) handleDNSZoneGet(w http.ResponseWriter, r *http.Request) error {
	z, err := s.services.DNSAdmin.FindDNSZone(r.Context(), pathParam(r, "id"))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", fleet.ETag(z.Generation))
	writeJSON(w, http.StatusOK, s.presentDNSZone(z))
	return nil
}

func (s *Server) handleDNSZoneUpdate(w http.ResponseWriter, r *http.Request) error {
	match, err := ifMatch(r)
	if err != nil {
		return err
	}
	var body admin.DNSZonePatch
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	z, err := s.services.DNSAdmin.UpdateDNSZone(r.Context(), pathParam(r, "id"), match, fleet.DNSZoneUpdate{
		RFC2136: rfc2136Settings(body.Rfc2136), Route53: route53Settings(body.Route53), Nameservers: body.Nameservers,
		Credentials: dnsCredentials(body.Credentials),
	})
	if err != nil {
		return err
	}
	w.Header().Set("ETag", fleet.ETag(z.Generation))
	writeJSON(w, http.StatusOK, s.presentDNSZone(z))
	return nil
}

func (s *Server) handleDNSZoneDelete(w http.ResponseWriter, r *http.Request) error {
	match, err := ifMatch(r)
	if err != nil {
		return err
	}
	if err := s.services.DNSAdmin.DeleteDNSZone(r.Context(), pathParam(r, "id"), match); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// presentDNSZone renders a zone for the admin API; its credentials never
// leave, has_credentials says whether there are some.
func (s *Server) presentDNSZone(z fleet.DNSZone) admin.DNSZone {
	out := admin.DNSZone{Kind: admin.DNSZoneKindDNSZone, Id: z.ID, Href: s.cfg.BasePath + "/admin/dns_zones/" + z.ID, Name: z.Name,
		Provider: admin.DNSProvider(z.Provider), Nameservers: castStrings[string](z.Nameservers), HasCredentials: z.HasCredentials,
		ServiceCount: z.Services, Generation: z.Generation, CreatedAt: z.CreatedAt, UpdatedAt: z.UpdatedAt}
	if c := z.RFC2136; c != nil {
		out.Rfc2136 = &admin.RFC2136Settings{Server: c.Server, TsigKeyName: c.TSIGKeyName, TsigAlgorithm: admin.RFC2136SettingsTsigAlgorithm(c.TSIGAlgorithm)}
	}
	if c := z.Route53; c != nil {
		out.Route53 = &admin.Route53Settings{HostedZoneId: c.HostedZoneID, Region: strPtr(c.Region), Endpoint: strPtr(c.Endpoint)}
	}
	return out
}

func rfc2136Settings(in *admin.RFC2136Settings) *fleet.RFC2136Settings {
	if in == nil {
		return nil
	}
	return &fleet.RFC2136Settings{Server: in.Server, TSIGKeyName: in.TsigKeyName, TSIGAlgorithm: string(in.TsigAlgorithm)}
}

func route53Settings(in *admin.Route53Settings) *fleet.Route53Settings {
	if in == nil {
		return nil
	}
	return &fleet.Route53Settings{HostedZoneID: in.HostedZoneId, Region: deref(in.Region), Endpoint: deref(in.Endpoint)}
}

func dnsCredentials(in *admin.DNSCredentials) *fleet.DNSCredentials {
	if in == nil {
		return nil
	}
	return &fleet.DNSCredentials{TSIGSecret: deref(in.TsigSecret), AccessKeyID: deref(in.AccessKeyId), SecretAccessKey: deref(in.SecretAccessKey)}
}

func (s *Server) handleDNSServiceCreate(w http.ResponseWriter, r *http.Request) error {
	var body admin.DNSServiceCreate
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	svc, err := s.services.DNSAdmin.CreateDNSService(r.Context(), caller(r), fleet.DNSServiceCreate{
		Name: body.Name, ZoneID: body.ZoneId, Subdomain: deref(body.Subdomain), NameTemplate: deref(body.NameTemplate),
		WriterOrgs: derefOr(body.WriterOrganizations), WriterServiceAccounts: derefOr(body.WriterServiceAccounts),
		RecordTypes: castStrings[fleet.DNSRecordType](derefOr(body.RecordTypes)), MinTTL: derefOr(body.MinTtl), MaxTTL: derefOr(body.MaxTtl),
		DefaultTTL: derefOr(body.DefaultTtl),
	})
	if err != nil {
		return err
	}
	out := s.presentDNSService(svc)
	w.Header().Set("Location", out.Href)
	w.Header().Set("ETag", fleet.ETag(svc.Generation))
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (s *Server) handleDNSServiceList(w http.ResponseWriter, r *http.Request) error {
	q := listQuery(r)
	list, total, err := s.services.DNSAdmin.ListDNSServices(r.Context(), q)
	if err != nil {
		return err
	}
	items := make([]admin.DNSService, len(list))
	for i, svc := range list {
		items[i] = s.presentDNSService(svc)
	}
	writeJSON(w, http.StatusOK, admin.DNSServiceList{Kind: admin.DNSServiceListKindDNSServiceList, Page: q.Page, Size: len(items),
		Total: total, Items: items})
	return nil
}

func (s *Server) handleDNSServiceGet(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.services.DNSAdmin.FindDNSService(r.Context(), pathParam(r, "id"))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", fleet.ETag(svc.Generation))
	writeJSON(w, http.StatusOK, s.presentDNSService(svc))
	return nil
}

func (s *Server) handleDNSServiceUpdate(w http.ResponseWriter, r *http.Request) error {
	match, err := ifMatch(r)
	if err != nil {
		return err
	}
	var body admin.DNSServicePatch
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	update := fleet.DNSServiceUpdate{WriterOrgs: body.WriterOrganizations, WriterServiceAccounts: body.WriterServiceAccounts,
		MinTTL: body.MinTtl, MaxTTL: body.MaxTtl, DefaultTTL: body.DefaultTtl}
	if body.RecordTypes != nil {
		types := castStrings[fleet.DNSRecordType](*body.RecordTypes)
		update.RecordTypes = &types
	}
	svc, err := s.services.DNSAdmin.UpdateDNSService(r.Context(), pathParam(r, "id"), match, update)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", fleet.ETag(svc.Generation))
	writeJSON(w, http.StatusOK, s.presentDNSService(svc))
	return nil
}

func (s *Server) handleDNSServiceDelete(w http.ResponseWriter, r *http.Request) error {
	match, err := ifMatch(r)
	if err != nil {
		return err
	}
	if err := s.services.DNSAdmin.DeleteDNSService(r.Context(), pathParam(r, "id"), match); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// presentDNSService renders a naming policy for the admin API, writers
// included.
func (s *Server) presentDNSService(svc fleet.DNSService) admin.DNSService {
	return admin.DNSService{Kind: admin.DNSServiceKindDNSService, Id: svc.ID, Href: s.cfg.BasePath + "/admin/dns_services/" + svc.ID,
		Name: svc.Name, ZoneId: svc.ZoneID, ZoneName: svc.ZoneName, Subdomain: svc.Subdomain, Subtree: svc.Subtree(),
		NameTemplate: svc.NameTemplate, WriterOrganizations: castStrings[string](svc.WriterOrgs), WriterServiceAccounts: castStrings[string](svc.WriterServiceAccounts),
		RecordTypes: castStrings[admin.DNSRecordType](svc.RecordTypes), MinTtl: svc.MinTTL, MaxTtl: svc.MaxTTL, DefaultTtl: svc.DefaultTTL, RecordCount: svc.Records,
		Generation: svc.Generation, CreatedAt: svc.CreatedAt, UpdatedAt: svc.UpdatedAt}
}

// castStrings converts a list between string types (the API's enums and
// the domain's); nil gives an empty list, as the specification's arrays are
// never null.
func castStrings[To, From ~string](in []From) []To {
	out := make([]To, len(in))
	for i, v := range in {
		out[i] = To(v)
	}
	return out
}
