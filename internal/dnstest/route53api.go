package dnstest

import (
	"encoding/xml"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// xmlSet is a ResourceRecordSet element.
type xmlSet struct {
	Name            string    `xml:"Name"`
	Type            string    `xml:"Type"`
	SetIdentifier   string    `xml:"SetIdentifier,omitempty"`
	TTL             *int64    `xml:"TTL,omitempty"`
	AliasTarget     *struct{} `xml:"AliasTarget,omitempty"`
	ResourceRecords []string  `xml:"ResourceRecords>ResourceRecord>Value"`
}

type xmlChangeInfo struct {
	ID          string `xml:"Id"`
	Status      string `xml:"Status"`
	SubmittedAt string `xml:"SubmittedAt"`
	Comment     string `xml:"Comment,omitempty"`
}

func (s *Route53Server) changeResourceRecordSets(id string, body []byte) (any, *apiError) {
	if e := s.noSuchZone(id); e != nil {
		return nil, e
	}
	var req struct {
		Comment string `xml:"ChangeBatch>Comment"`
		Changes []struct {
			Action string `xml:"Action"`
			Set    xmlSet `xml:"ResourceRecordSet"`
		} `xml:"ChangeBatch>Changes>Change"`
	}
	if err := xml.Unmarshal(body, &req); err != nil || len(req.Changes) == 0 {
		return nil, &apiError{status: http.StatusBadRequest, code: "InvalidInput", message: "Invalid XML ; the request has no ChangeBatch with Changes"}
	}
	batch := make([]batchChange, 0, len(req.Changes))
	for _, c := range req.Changes {
		switch {
		case !slices.Contains([]string{"CREATE", "DELETE", "UPSERT"}, c.Action):
			return nil, &apiError{status: http.StatusBadRequest, code: "InvalidInput", message: "Invalid request: Action must be CREATE, DELETE or UPSERT"}
		case c.Set.AliasTarget != nil || c.Set.SetIdentifier != "":
			return nil, &apiError{status: http.StatusBadRequest, code: "InvalidInput", message: "Alias and routing-policy record sets are not supported by this contract server"}
		case c.Set.TTL == nil || len(c.Set.ResourceRecords) == 0:
			return nil, &apiError{status: http.StatusBadRequest, code: "InvalidInput", message: "Invalid request: Expected exactly one of [AliasTarget, all of [TTL, and ResourceRecords], or TrafficPolicyInstanceId], but found none in Change with [Action=" + c.Action + ", Name=" + c.Set.Name + ", Type=" + c.Set.Type + ", SetIdentifier=null]"}
		}
		batch = append(batch, batchChange{Action: c.Action, Set: rrset{Name: fqdn(c.Set.Name), Type: c.Set.Type, TTL: *c.Set.TTL, Values: c.Set.ResourceRecords}})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next, msgs := apply(s.zone, s.apex, batch)
	if msgs != nil {
		return nil, &apiError{status: http.StatusBadRequest, code: "InvalidChangeBatch", messages: msgs}
	}
	s.zone = next
	s.batch = s.batch[:0]
	for _, c := range batch {
		s.batch = append(s.batch, strings.Join(append([]string{c.Action, strings.TrimSuffix(c.Set.Name, "."), c.Set.Type,
			strconv.FormatInt(c.Set.TTL, 10)}, c.Set.Values...), " "))
	}
	c := s.record(next, false)
	return struct {
		XMLName    xml.Name      `xml:"ChangeResourceRecordSetsResponse"`
		NS         string        `xml:"xmlns,attr"`
		ChangeInfo xmlChangeInfo `xml:"ChangeInfo"`
	}{NS: route53NS, ChangeInfo: xmlChangeInfo{ID: "/change/" + c.id, Status: "PENDING", SubmittedAt: c.submitted.UTC().Format(time.RFC3339), Comment: req.Comment}}, nil
}

func (s *Route53Server) getChange(id string) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.byID[id]
	if !ok {
		return nil, &apiError{status: http.StatusNotFound, code: "NoSuchChange", message: "A change with the specified change ID does not exist."}
	}
	status := "INSYNC"
	if !s.insync(c) {
		status = "PENDING"
		c.polls++
	}
	return struct {
		XMLName    xml.Name      `xml:"GetChangeResponse"`
		NS         string        `xml:"xmlns,attr"`
		ChangeInfo xmlChangeInfo `xml:"ChangeInfo"`
	}{NS: route53NS, ChangeInfo: xmlChangeInfo{ID: "/change/" + c.id, Status: status, SubmittedAt: c.submitted.UTC().Format(time.RFC3339)}}, nil
}

func (s *Route53Server) getHostedZone(id string) (any, *apiError) {
	if e := s.noSuchZone(id); e != nil {
		return nil, e
	}
	s.mu.Lock()
	count := len(s.zone)
	s.mu.Unlock()
	return struct {
		XMLName     xml.Name `xml:"GetHostedZoneResponse"`
		NS          string   `xml:"xmlns,attr"`
		ID          string   `xml:"HostedZone>Id"`
		Name        string   `xml:"HostedZone>Name"`
		Reference   string   `xml:"HostedZone>CallerReference"`
		Private     bool     `xml:"HostedZone>Config>PrivateZone"`
		Count       int      `xml:"HostedZone>ResourceRecordSetCount"`
		NameServers []string `xml:"DelegationSet>NameServers>NameServer"`
	}{NS: route53NS, ID: "/hostedzone/" + s.HostedZoneID, Name: s.apex, Reference: "dnstest", Count: count,
		NameServers: fqdnAll(s.nameServers)}, nil
}

func (s *Route53Server) listResourceRecordSets(id string, r *http.Request) (any, *apiError) {
	if e := s.noSuchZone(id); e != nil {
		return nil, e
	}
	q := r.URL.Query()
	name, typ := q.Get("name"), q.Get("type")
	if typ != "" && name == "" {
		return nil, &apiError{status: http.StatusBadRequest, code: "InvalidInput", message: "The input is not valid: a type needs a name"}
	}
	if name != "" {
		name = fqdn(name)
	}
	max := maxListItems
	if v := q.Get("maxitems"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, &apiError{status: http.StatusBadRequest, code: "InvalidInput", message: "The input is not valid: maxitems"}
		}
		max = min(n, maxListItems)
	}
	s.mu.Lock()
	sets, next := list(s.zone, name, typ, max)
	s.mu.Unlock()
	type response struct {
		XMLName        xml.Name `xml:"ListResourceRecordSetsResponse"`
		NS             string   `xml:"xmlns,attr"`
		Sets           []xmlSet `xml:"ResourceRecordSets>ResourceRecordSet"`
		IsTruncated    bool     `xml:"IsTruncated"`
		NextRecordName string   `xml:"NextRecordName,omitempty"`
		NextRecordType string   `xml:"NextRecordType,omitempty"`
		MaxItems       string   `xml:"MaxItems"`
	}
	resp := response{NS: route53NS, MaxItems: strconv.Itoa(max), IsTruncated: next != nil, Sets: []xmlSet{}}
	for _, set := range sets {
		resp.Sets = append(resp.Sets, xmlSet{Name: set.Name, Type: set.Type, TTL: &set.TTL, ResourceRecords: set.Values})
	}
	if next != nil {
		resp.NextRecordName, resp.NextRecordType = next.name, next.typ
	}
	return resp, nil
}
