package dnstest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/route53"
	"github.com/aws/aws-sdk-go-v2/service/route53/types"
	"github.com/miekg/dns"
	"github.com/onsi/gomega"

	"github.com/fleetmanager/fleet-manager/internal/dnstest"
	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// The Route53Server tests drive it with the AWS SDK's route53 client, the
// one the provider uses; Route53 and moto cannot be reached from here (PyPI
// is refused), so the server stands in for them.

func client(s *dnstest.Route53Server) *route53.Client {
	return route53.New(route53.Options{Region: s.Region, BaseEndpoint: aws.String(s.URL),
		Credentials: credentials.NewStaticCredentialsProvider(s.AccessKeyID, s.SecretAccessKey, "")})
}

func aSet(name string, ttl int64, values ...string) *types.ResourceRecordSet {
	rs := &types.ResourceRecordSet{Name: aws.String(name), Type: types.RRTypeA, TTL: aws.Int64(ttl)}
	for _, v := range values {
		rs.ResourceRecords = append(rs.ResourceRecords, types.ResourceRecord{Value: aws.String(v)})
	}
	return rs
}

// TestRoute53ServerListsInPages (Route53Server standing in for Route53 and
// moto, unreachable here): ListResourceRecordSets returns the apex's SOA
// and NS and the sets in Route53's order (labels reversed, then type), in
// pages of MaxItems that the SDK's paginator follows.
func TestRoute53ServerListsInPages(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	s := dnstest.StartRoute53(t, dnstest.Route53Options{Zone: "example.test"})
	c, ctx := client(s), context.Background()
	var changes []types.Change
	for _, name := range []string{"b.example.test", "a.b.example.test", "z.example.test", "a.example.test"} {
		changes = append(changes, types.Change{Action: types.ChangeActionCreate, ResourceRecordSet: aSet(name, 60, "192.0.2.1")})
	}
	_, err := c.ChangeResourceRecordSets(ctx, &route53.ChangeResourceRecordSetsInput{HostedZoneId: aws.String(s.HostedZoneID),
		ChangeBatch: &types.ChangeBatch{Changes: changes}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	var names []string
	pages := route53.NewListResourceRecordSetsPaginator(c, &route53.ListResourceRecordSetsInput{HostedZoneId: aws.String(s.HostedZoneID), MaxItems: aws.Int32(2)})
	for n := 0; pages.HasMorePages(); n++ {
		page, err := pages.NextPage(ctx)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(len(page.ResourceRecordSets)).To(gomega.BeNumerically("<=", 2))
		for _, rs := range page.ResourceRecordSets {
			names = append(names, aws.ToString(rs.Name)+" "+string(rs.Type))
		}
	}
	g.Expect(names).To(gomega.Equal([]string{"example.test. NS", "example.test. SOA", "a.example.test. A", "b.example.test. A",
		"a.b.example.test. A", "z.example.test. A"}))

	out, err := c.ListResourceRecordSets(ctx, &route53.ListResourceRecordSetsInput{HostedZoneId: aws.String(s.HostedZoneID),
		StartRecordName: aws.String("b.example.test"), MaxItems: aws.Int32(1)})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(out.IsTruncated).To(gomega.BeTrue())
	g.Expect(aws.ToString(out.NextRecordName)).To(gomega.Equal("a.b.example.test."))
}

// TestRoute53ServerRefusesBatchesAsRoute53 (Route53Server standing in for
// Route53 and moto, unreachable here): a batch with several faults is
// refused whole with every one of Route53's messages, which the SDK reads
// as an InvalidChangeBatch.
func TestRoute53ServerRefusesBatchesAsRoute53(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	s := dnstest.StartRoute53(t, dnstest.Route53Options{Zone: "example.test"})
	s.Put("taken.example.test", fleet.DNSRecordSet{Type: fleet.DNSRecordA, TTL: 60, Values: []string{"192.0.2.1"}})
	c := client(s)
	_, err := c.ChangeResourceRecordSets(context.Background(), &route53.ChangeResourceRecordSetsInput{HostedZoneId: aws.String(s.HostedZoneID),
		ChangeBatch: &types.ChangeBatch{Changes: []types.Change{
			{Action: types.ChangeActionCreate, ResourceRecordSet: aSet("new.example.test", 60, "192.0.2.2")},
			{Action: types.ChangeActionCreate, ResourceRecordSet: aSet("taken.example.test", 60, "192.0.2.1")},
			{Action: types.ChangeActionDelete, ResourceRecordSet: aSet("taken.example.test", 300, "192.0.2.1")},
			{Action: types.ChangeActionDelete, ResourceRecordSet: aSet("missing.example.test", 60, "192.0.2.1")},
			{Action: types.ChangeActionUpsert, ResourceRecordSet: aSet("bad.example.test", 60, "300.1.1.1")},
		}}})
	icb, ok := errors.AsType[*types.InvalidChangeBatch](err)
	g.Expect(ok).To(gomega.BeTrue(), "ChangeResourceRecordSets = %v, want an InvalidChangeBatch", err)
	g.Expect(icb.Messages).To(gomega.Equal([]string{
		"Tried to create resource record set [name='taken.example.test.', type='A'] but it already exists",
		"Tried to delete resource record set [name='taken.example.test.', type='A'] but the values provided do not match the current values",
		"Tried to delete resource record set [name='missing.example.test.', type='A'] but it was not found",
		"Invalid Resource Record: 'FATAL problem: ARRDATAIllegalIPv4Address (Value is not a valid IPv4 address) encountered with '300.1.1.1''",
	}))
	g.Expect(s.Sets()).To(gomega.HaveLen(1), "nothing of a refused batch is applied")

	resp, err := http.Get(s.URL + "/2013-04-01/hostedzone/" + s.HostedZoneID)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(gomega.Equal(http.StatusForbidden), "an unsigned request is refused")
}

// TestRoute53ServerAnswersDNS (Route53Server standing in for Route53 and
// moto, unreachable here): its DNS server answers INSYNC records
// authoritatively, NODATA and NXDOMAIN with the SOA, REFUSED outside the
// zone, and a change stays PENDING until PendingFor has passed.
func TestRoute53ServerAnswersDNS(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	const pending = 300 * time.Millisecond
	s := dnstest.StartRoute53(t, dnstest.Route53Options{Zone: "example.test", PendingFor: pending})
	out, err := client(s).ChangeResourceRecordSets(context.Background(), &route53.ChangeResourceRecordSetsInput{
		HostedZoneId: aws.String(s.HostedZoneID), ChangeBatch: &types.ChangeBatch{Changes: []types.Change{
			{Action: types.ChangeActionCreate, ResourceRecordSet: aSet("a.svc.example.test", 60, "192.0.2.1")}}}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(out.ChangeInfo.Status).To(gomega.Equal(types.ChangeStatusPending))
	g.Expect(query(t, s.DNSAddr, "a.svc.example.test", dns.TypeA)).To(gomega.Equal("NXDOMAIN AA answers 0 authority SOA"))
	g.Eventually(func(g gomega.Gomega) {
		got, err := client(s).GetChange(context.Background(), &route53.GetChangeInput{Id: out.ChangeInfo.Id})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(got.ChangeInfo.Status).To(gomega.Equal(types.ChangeStatusInsync))
	}).WithTimeout(10 * pending).WithPolling(pending / 5).Should(gomega.Succeed())
	for _, tc := range []struct {
		name  string
		qtype uint16
		want  string
	}{
		{"a.svc.example.test", dns.TypeA, "NOERROR AA answers 1 authority "},
		{"A.SVC.EXAMPLE.TEST", dns.TypeA, "NOERROR AA answers 1 authority "},
		{"a.svc.example.test", dns.TypeAAAA, "NOERROR AA answers 0 authority SOA"},
		{"svc.example.test", dns.TypeA, "NOERROR AA answers 0 authority SOA"},
		{"b.svc.example.test", dns.TypeA, "NXDOMAIN AA answers 0 authority SOA"},
		{"a.other.test", dns.TypeA, "REFUSED answers 0 authority "},
	} {
		if got := query(t, s.DNSAddr, tc.name, tc.qtype); got != tc.want {
			t.Errorf("query(%s %s) = %q, want %q", tc.name, dns.TypeToString[tc.qtype], got, tc.want)
		}
	}
}

// query describes the answer to a question over TCP.
func query(t *testing.T, addr, name string, qtype uint16) string {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), qtype)
	resp, _, err := (&dns.Client{Net: "tcp", Timeout: 5 * time.Second}).Exchange(q, addr)
	if err != nil {
		t.Fatalf("query(%s): %v", name, err)
	}
	var authority []string
	for _, rr := range resp.Ns {
		authority = append(authority, dns.TypeToString[rr.Header().Rrtype])
	}
	aa := ""
	if resp.Authoritative {
		aa = " AA"
	}
	return fmt.Sprintf("%s%s answers %d authority %s", dns.RcodeToString[resp.Rcode], aa, len(resp.Answer), strings.Join(authority, ","))
}

// TestPrimariesStopAndStart: a primary started by the test (BIND 9, Knot)
// answers its zone's SOA; stopped, it does not answer; started again, it
// answers on the same address.
func TestPrimariesStopAndStart(t *testing.T) {
	t.Parallel()
	for name, start := range map[string]func(testing.TB, string) *dnstest.Primary{"BIND": dnstest.StartBIND, "Knot": dnstest.StartKnot} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := start(t, "example.test")
			if got := query(t, b.Addr, "example.test", dns.TypeSOA); got != "NOERROR AA answers 1 authority " {
				t.Fatalf("SOA = %q, want an authoritative answer", got)
			}
			addr := b.Addr
			b.Stop()
			q := new(dns.Msg)
			q.SetQuestion("example.test.", dns.TypeSOA)
			if _, _, err := (&dns.Client{Net: "tcp", Timeout: time.Second}).Exchange(q, addr); err == nil {
				t.Errorf("a stopped %s answered", name)
			}
			b.Start(t)
			if got := query(t, b.Addr, "example.test", dns.TypeSOA); b.Addr != addr || got != "NOERROR AA answers 1 authority " {
				t.Errorf("restarted at %s (was %s): SOA = %q, want the same address and an answer", b.Addr, addr, got)
			}
		})
	}
}
