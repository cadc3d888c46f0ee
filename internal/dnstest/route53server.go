package dnstest

import (
	"crypto/rand"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// route53NS is the XML namespace of Route53's API version 2013-04-01.
const route53NS = "https://route53.amazonaws.com/doc/2013-04-01/"

// Route53Options configure a Route53Server; zero fields take defaults.
type Route53Options struct {
	// Zone is the hosted zone's apex (required).
	Zone string
	// HostedZoneID defaults to a random "Z..." id.
	HostedZoneID string
	// AccessKeyID and SecretAccessKey are the only credentials accepted;
	// random by default.
	AccessKeyID, SecretAccessKey string
	// Region is the signing region accepted, us-east-1 by default.
	Region string
	// NameServers is the delegation set, four awsdns-like names by default.
	NameServers []string
	// PendingPolls is how many GetChange calls answer PENDING for a change,
	// and PendingFor how long after its submission it stays PENDING; a
	// change is INSYNC, and its records in the DNS answers, once both passed.
	PendingPolls int
	PendingFor   time.Duration
}

// Route53Server serves the part of the Route53 API the DNS provider uses:
// ChangeResourceRecordSets, GetChange, GetHostedZone and
// ListResourceRecordSets of one hosted zone, each request's Signature
// Version 4 verified, and answers the zone's INSYNC records over DNS. It
// stands in for Route53 and for moto, neither of which can be reached from
// here (PyPI, moto's home, is refused).
type Route53Server struct {
	// URL is the API's endpoint (route53.Options.BaseEndpoint).
	URL string
	// DNSAddr is the authoritative DNS server's "127.0.0.1:port", UDP and TCP.
	DNSAddr string
	// HostedZoneID, AccessKeyID, SecretAccessKey and Region are the
	// options, defaults filled in.
	HostedZoneID, AccessKeyID, SecretAccessKey, Region string
	// Zone is the apex, lowercase, without the final dot.
	Zone string

	apex        string
	nameServers []string
	opts        Route53Options
	now         func() time.Time

	mu       sync.Mutex
	zone     map[setKey]rrset
	initial  map[setKey]rrset
	changes  []*change
	byID     map[string]*change
	requests map[string]int
	batch    []string
	throttle int
	down     bool
}

// StartRoute53 starts a Route53Server; it stops when the test ends.
func StartRoute53(t testing.TB, opts Route53Options) *Route53Server {
	t.Helper()
	if opts.Zone == "" {
		t.Fatal("dnstest: Route53Options.Zone is required")
	}
	s := &Route53Server{opts: opts, now: time.Now, Zone: fleet.NormalizeDNSName(opts.Zone), apex: fqdn(opts.Zone),
		HostedZoneID: cmpOr(opts.HostedZoneID, "Z"+randomID(20)), AccessKeyID: cmpOr(opts.AccessKeyID, "AKIA"+randomID(16)),
		SecretAccessKey: cmpOr(opts.SecretAccessKey, randomID(40)), Region: cmpOr(opts.Region, "us-east-1"),
		nameServers: opts.NameServers, byID: map[string]*change{}, requests: map[string]int{}}
	if len(s.nameServers) == 0 {
		s.nameServers = []string{"ns-1.awsdns-00.com.", "ns-513.awsdns-00.net.", "ns-1025.awsdns-00.org.", "ns-1537.awsdns-00.co.uk."}
	}
	s.zone = map[setKey]rrset{
		{s.apex, "SOA"}: {Name: s.apex, Type: "SOA", TTL: 900,
			Values: []string{fqdn(s.nameServers[0]) + " awsdns-hostmaster.amazon.com. 1 7200 900 1209600 86400"}},
		{s.apex, "NS"}: {Name: s.apex, Type: "NS", TTL: 172800, Values: fqdnAll(s.nameServers)},
	}
	s.initial = s.zone
	srv := httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	s.DNSAddr = s.serveDNS(t)
	t.Logf("dnstest: Route53 contract server (Route53 and moto are unreachable here) at %s, DNS at %s", s.URL, s.DNSAddr)
	return s
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func fqdnAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fqdn(n)
	}
	return out
}

// randomID returns n random upper-case letters and digits.
func randomID(n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// Throttle has the next n requests answered 400 Throttling, as Route53
// answers a caller over its rate.
func (s *Route53Server) Throttle(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.throttle = n
}

// SetDown has every request answered 503 while down is set (an outage).
func (s *Route53Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// Requests returns how many requests of an operation
// ("ChangeResourceRecordSets", "GetChange", "GetHostedZone",
// "ListResourceRecordSets") arrived, failed ones included.
func (s *Route53Server) Requests(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[op]
}

// Changes returns how many change batches were accepted.
func (s *Route53Server) Changes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.changes)
}

// Sets returns the zone's record sets now (INSYNC or not) but its SOA and
// NS, names without the final dot, in Route53's order.
func (s *Route53Server) Sets() []fleet.DNSRecordSet {
	s.mu.Lock()
	defer s.mu.Unlock()
	sets, _ := list(s.zone, "", "", len(s.zone))
	var out []fleet.DNSRecordSet
	for _, r := range sets {
		if r.Name == s.apex && (r.Type == "SOA" || r.Type == "NS") {
			continue
		}
		out = append(out, fleet.DNSRecordSet{Name: fleet.NormalizeDNSName(r.Name), Type: fleet.DNSRecordType(r.Type), TTL: int(r.TTL),
			Values: slices.Clone(r.Values)})
	}
	return out
}

// Put replaces the sets of name with sets, as someone outside the fleet
// manager would (drift); it is INSYNC at once.
func (s *Route53Server) Put(name string, sets ...fleet.DNSRecordSet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name = fqdn(name)
	for k := range s.zone {
		if k.name == name {
			delete(s.zone, k)
		}
	}
	for _, set := range sets {
		s.zone[setKey{name, string(set.Type)}] = rrset{Name: name, Type: string(set.Type), TTL: int64(set.TTL), Values: slices.Clone(set.Values)}
	}
	s.record(s.zone, true)
}

// LastBatch returns the last accepted change batch, a change a line:
// "ACTION name TYPE TTL value...", names without the final dot.
func (s *Route53Server) LastBatch() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.batch)
}

// Add adds sets to the zone beside what their names hold (replacing a set
// of the same name and type), as someone outside the fleet manager would;
// it is INSYNC at once. Values are as Route53 holds them (a TXT's quoted).
func (s *Route53Server) Add(sets ...fleet.DNSRecordSet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, set := range sets {
		name := fqdn(set.Name)
		s.zone[setKey{name, string(set.Type)}] = rrset{Name: name, Type: string(set.Type), TTL: int64(set.TTL), Values: slices.Clone(set.Values)}
	}
	s.record(s.zone, true)
}

// record keeps an accepted change with the zone it made.
func (s *Route53Server) record(zone map[setKey]rrset, synced bool) *change {
	c := &change{id: "C" + randomID(13), submitted: s.now(), zone: zone}
	if synced {
		c.polls, c.submitted = s.opts.PendingPolls, c.submitted.Add(-s.opts.PendingFor)
	}
	s.changes = append(s.changes, c)
	s.byID[c.id] = c
	return c
}

// insync reports whether a change reached the DNS servers.
func (s *Route53Server) insync(c *change) bool {
	return c.polls >= s.opts.PendingPolls && s.now().Sub(c.submitted) >= s.opts.PendingFor
}

// served returns the zone as the DNS servers hold it: the latest INSYNC
// change's.
func (s *Route53Server) served() map[setKey]rrset {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range slices.Backward(s.changes) {
		if s.insync(c) {
			return c.zone
		}
	}
	return s.initial
}

// apiError is an error answer: Route53's ErrorResponse, or its own
// InvalidChangeBatch shape when messages are set.
type apiError struct {
	status        int
	code, message string
	messages      []string
}

func (e *apiError) write(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("X-Amzn-Requestid", randomID(32))
	w.WriteHeader(e.status)
	if e.messages != nil {
		writeXML(w, struct {
			XMLName  xml.Name `xml:"InvalidChangeBatch"`
			NS       string   `xml:"xmlns,attr"`
			Messages []string `xml:"Messages>Message"`
			ID       string   `xml:"RequestId"`
		}{NS: route53NS, Messages: e.messages, ID: randomID(32)})
		return
	}
	kind := "Sender"
	if e.status >= 500 {
		kind = "Receiver"
	}
	writeXML(w, struct {
		XMLName xml.Name `xml:"ErrorResponse"`
		NS      string   `xml:"xmlns,attr"`
		Type    string   `xml:"Error>Type"`
		Code    string   `xml:"Error>Code"`
		Message string   `xml:"Error>Message"`
		ID      string   `xml:"RequestId"`
	}{NS: route53NS, Type: kind, Code: e.code, Message: e.message, ID: randomID(32)})
}

func writeXML(w io.Writer, v any) {
	_, _ = io.WriteString(w, xml.Header)
	_ = xml.NewEncoder(w).Encode(v)
}

// operation names a request's operation and its hosted zone or change id.
func operation(r *http.Request) (op, id string) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/2013-04-01/")
	if !ok {
		return "", ""
	}
	parts := strings.Split(strings.TrimSuffix(rest, "/"), "/")
	switch {
	case len(parts) == 2 && parts[0] == "change" && r.Method == http.MethodGet:
		return "GetChange", parts[1]
	case len(parts) == 2 && parts[0] == "hostedzone" && r.Method == http.MethodGet:
		return "GetHostedZone", parts[1]
	case len(parts) == 3 && parts[0] == "hostedzone" && parts[2] == "rrset" && r.Method == http.MethodPost:
		return "ChangeResourceRecordSets", parts[1]
	case len(parts) == 3 && parts[0] == "hostedzone" && parts[2] == "rrset" && r.Method == http.MethodGet:
		return "ListResourceRecordSets", parts[1]
	}
	return "", ""
}

func (s *Route53Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		(&apiError{status: http.StatusBadRequest, code: "InvalidInput", message: "unreadable body"}).write(w)
		return
	}
	op, id := operation(r)
	if e := s.admit(r, body, op); e != nil {
		e.write(w)
		return
	}
	var resp any
	var e *apiError
	switch op {
	case "ChangeResourceRecordSets":
		resp, e = s.changeResourceRecordSets(id, body)
	case "GetChange":
		resp, e = s.getChange(id)
	case "GetHostedZone":
		resp, e = s.getHostedZone(id)
	case "ListResourceRecordSets":
		resp, e = s.listResourceRecordSets(id, r)
	default:
		e = &apiError{status: http.StatusNotFound, code: "UnknownOperationException", message: "The operation is not supported by this contract server."}
	}
	if e != nil {
		e.write(w)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("X-Amzn-Requestid", randomID(32))
	writeXML(w, resp)
}

// admit counts a request and answers it when down, unsigned or throttled.
func (s *Route53Server) admit(r *http.Request, body []byte, op string) *apiError {
	s.mu.Lock()
	s.requests[op]++
	down := s.down
	s.mu.Unlock()
	if down {
		return &apiError{status: http.StatusServiceUnavailable, code: "ServiceUnavailable", message: "Service Unavailable"}
	}
	if e := s.verifySignature(r, body); e != nil {
		return e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.throttle > 0 {
		s.throttle--
		return &apiError{status: http.StatusBadRequest, code: "Throttling", message: "Rate exceeded"}
	}
	return nil
}

func (s *Route53Server) noSuchZone(id string) *apiError {
	if id == s.HostedZoneID {
		return nil
	}
	return &apiError{status: http.StatusNotFound, code: "NoSuchHostedZone", message: "No hosted zone found with ID: " + id}
}

// String describes the server for failure messages.
func (s *Route53Server) String() string {
	return fmt.Sprintf("Route53 contract server %s (zone %s, id %s)", s.URL, s.Zone, s.HostedZoneID)
}
