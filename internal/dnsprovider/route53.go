package dnsprovider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/route53"
	"github.com/aws/aws-sdk-go-v2/service/route53/types"
	"github.com/aws/smithy-go"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// Route53 writes zones to Amazon Route53 hosted zones. Each zone has its
// own client: the zone's access key when it has one, else the deployment's
// credentials as the SDK's default chain finds them. The SDK's standard
// retryer retries throttling, 5xx answers and network errors with its
// backoff, up to Config.Route53MaxAttempts attempts per call.
type Route53 struct {
	cfg Config

	mu      sync.Mutex
	clients map[string]*route53.Client // by clientKey
}

// NewRoute53 returns the Route53 provider.
func NewRoute53(cfg Config) *Route53 {
	return &Route53{cfg: cfg.defaulted(), clients: map[string]*route53.Client{}}
}

// changeIDSeparator joins the change ids of a batch sent in several
// requests (route53's ids are letters and digits).
const changeIDSeparator = " "

// Apply sends changes as ChangeResourceRecordSets requests: one when the
// batch fits Route53's limits of a request, else consecutive chunks that
// each fit (each is atomic, the batch as a whole is not: a failure leaves
// the chunks before it applied, and the next pass's changes self-heal, as
// below). Each change carries exactly this deployment's sets
// (ownership.go): a DELETE of what it last wrote, record and ownership
// record, with their exact values, which Route53 refuses when the zone
// holds something else (its own prerequisite), and a CREATE of the new
// ones, which Route53 refuses when a set is in the way. When Route53
// refuses a request only because of that, Apply reads those names' sets
// and sends the request once more, planned from what they hold; a name
// whose sets are not this deployment's is refused with Conflicts, and the
// request is not sent. The change id joins the requests' ids with spaces.
func (p *Route53) Apply(ctx context.Context, zone fleet.DNSZoneAccess, changes []fleet.DNSChange) (string, error) {
	client, zoneID, err := p.client(ctx, zone)
	if err != nil {
		return "", err
	}
	var groups []group
	for _, c := range changes {
		if r := validChange(c); r != nil {
			return "", r
		}
		if c.Upsert == nil && c.Previous == nil {
			continue
		}
		pl, _ := decide(p.cfg.OwnerID, c, written(p.cfg.OwnerID, c.RecordID, c.Previous))
		groups = append(groups, group{change: c, changes: route53Changes(pl)})
	}
	var ids []string
	for _, chunk := range chunks(groups) {
		sent, err := p.send(ctx, client, zone, zoneID, chunk)
		if err != nil {
			return "", err
		}
		ids = append(ids, sent...)
	}
	return strings.Join(ids, changeIDSeparator), nil
}

// send sends one request and, when Route53 refuses it for drift, sends it
// once more planned from the names' sets as Route53 holds them (in more
// than one request when those pass a request's limits). Drift again is
// someone writing the names meanwhile: a transient error, that the next
// pass heals.
func (p *Route53) send(ctx context.Context, client *route53.Client, zone fleet.DNSZoneAccess, zoneID string, groups []group) ([]string, error) {
	id, err := changeSets(ctx, client, zoneID, groups)
	drifted := driftedNames(err)
	if len(drifted) == 0 {
		if err != nil {
			return nil, p.classify(zone, "ChangeResourceRecordSets", err)
		}
		return nonEmpty(id), nil
	}
	conflicts := map[string]string{}
	for i, g := range groups {
		if !drifted[g.name()] {
			continue
		}
		st, err := readRoute53(ctx, client, zoneID, g.name())
		if err != nil {
			return nil, p.classify(zone, "ListResourceRecordSets", err)
		}
		pl, conflict := decide(p.cfg.OwnerID, g.change, st)
		if conflict != "" {
			conflicts[g.change.RecordID] = conflict
			continue
		}
		groups[i].changes = route53Changes(pl)
	}
	if len(conflicts) > 0 {
		return nil, &fleet.DNSRefusal{Reason: "names hold records this deployment does not own", Conflicts: conflicts}
	}
	var ids []string
	for _, chunk := range chunks(groups) {
		id, err := changeSets(ctx, client, zoneID, chunk)
		switch {
		case len(driftedNames(err)) > 0:
			return nil, fmt.Errorf("Route53 ChangeResourceRecordSets(%s): the names changed again while their sets were read", zone.Zone.Name)
		case err != nil:
			return nil, p.classify(zone, "ChangeResourceRecordSets", err)
		}
		ids = append(ids, nonEmpty(id)...)
	}
	return ids, nil
}

func nonEmpty(id string) []string {
	if id == "" {
		return nil
	}
	return []string{id}
}

func changeSets(ctx context.Context, client *route53.Client, zoneID string, groups []group) (string, error) {
	var changes []types.Change
	for _, g := range groups {
		changes = append(changes, g.changes...)
	}
	if len(changes) == 0 {
		return "", nil
	}
	out, err := client.ChangeResourceRecordSets(ctx, &route53.ChangeResourceRecordSetsInput{HostedZoneId: aws.String(zoneID),
		ChangeBatch: &types.ChangeBatch{Changes: changes, Comment: aws.String("fleet-manager dns_mgr")}})
	if err != nil {
		return "", err
	}
	return strings.TrimPrefix(aws.ToString(out.ChangeInfo.Id), "/change/"), nil
}

// refusedCodes are Route53's answers about the request's content or the
// caller's rights: sending the same again fails again.
var refusedCodes = []string{"InvalidChangeBatch", "InvalidInput", "NoSuchHostedZone", "NoSuchChange", "AccessDenied",
	"AccessDeniedException", "SignatureDoesNotMatch", "InvalidClientTokenId", "IncompleteSignature",
	"MissingAuthenticationToken", "UnrecognizedClientException", "InvalidSignatureException"}

// classify turns an SDK error into a refusal or a transient error, without
// credentials.
func (p *Route53) classify(zone fleet.DNSZoneAccess, op string, err error) error {
	secrets := []string{zone.Credentials.AccessKeyID, zone.Credentials.SecretAccessKey}
	var icb *types.InvalidChangeBatch
	if errors.As(err, &icb) {
		msg := strings.Join(icb.Messages, "; ")
		if msg == "" {
			msg = aws.ToString(icb.Message)
		}
		return &fleet.DNSRefusal{Reason: redact("InvalidChangeBatch: "+msg, secrets...)}
	}
	var api smithy.APIError
	if errors.As(err, &api) && slices.Contains(refusedCodes, api.ErrorCode()) {
		return &fleet.DNSRefusal{Reason: redact(api.ErrorCode()+": "+api.ErrorMessage(), secrets...)}
	}
	return fmt.Errorf("Route53 %s(%s): %s", op, zone.Zone.Name, redact(err.Error(), secrets...))
}

// Synced reports whether every request of the change is INSYNC.
func (p *Route53) Synced(ctx context.Context, zone fleet.DNSZoneAccess, changeID string) (bool, error) {
	client, _, err := p.client(ctx, zone)
	if err != nil {
		return false, err
	}
	for id := range strings.SplitSeq(changeID, changeIDSeparator) {
		if id == "" {
			continue
		}
		out, err := client.GetChange(ctx, &route53.GetChangeInput{Id: aws.String(id)})
		if err != nil {
			return false, p.classify(zone, "GetChange", err)
		}
		if out.ChangeInfo.Status != types.ChangeStatusInsync {
			return false, nil
		}
	}
	return true, nil
}

// Nameservers returns the hosted zone's delegation set, on port 53.
func (p *Route53) Nameservers(ctx context.Context, zone fleet.DNSZoneAccess) ([]string, error) {
	client, zoneID, err := p.client(ctx, zone)
	if err != nil {
		return nil, err
	}
	out, err := client.GetHostedZone(ctx, &route53.GetHostedZoneInput{Id: aws.String(zoneID)})
	if err != nil {
		return nil, p.classify(zone, "GetHostedZone", err)
	}
	if out.DelegationSet == nil || len(out.DelegationSet.NameServers) == 0 {
		return nil, &fleet.DNSRefusal{Reason: "the hosted zone has no delegation set (a private zone): name the zone's nameservers"}
	}
	ns := make([]string, 0, len(out.DelegationSet.NameServers))
	for _, n := range out.DelegationSet.NameServers {
		ns = append(ns, net.JoinHostPort(fleet.NormalizeDNSName(n), "53"))
	}
	return ns, nil
}

// client returns the zone's client, made on first use and kept while the
// zone's settings and credentials stay the same.
func (p *Route53) client(ctx context.Context, zone fleet.DNSZoneAccess) (*route53.Client, string, error) {
	s := zone.Zone.Route53
	if s == nil {
		return nil, "", &fleet.DNSRefusal{Reason: "the zone has no route53 settings"}
	}
	creds := zone.Credentials
	sum := sha256.Sum256([]byte(strings.Join([]string{zone.Zone.ID, s.HostedZoneID, s.Region, s.Endpoint, creds.AccessKeyID,
		creds.SecretAccessKey}, "\x00")))
	key := hex.EncodeToString(sum[:])
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[key]; ok {
		return c, s.HostedZoneID, nil
	}
	region := s.Region
	if region == "" {
		region = DefaultRoute53Region
	}
	opts := []func(*config.LoadOptions) error{config.WithRegion(region),
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTimeout(p.cfg.Route53Timeout)), config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts, o.MaxBackoff = p.cfg.Route53MaxAttempts, p.cfg.Route53MaxBackoff
			})
		})}
	if creds.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(creds.AccessKeyID,
			creds.SecretAccessKey, "")))
	}
	loadCtx, cancel := context.WithTimeout(ctx, p.cfg.DNSTimeout+loadConfigTimeout)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(loadCtx, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("Route53(%s): loading the AWS configuration: %s", zone.Zone.Name,
			redact(err.Error(), creds.AccessKeyID, creds.SecretAccessKey))
	}
	c := route53.NewFromConfig(cfg, func(o *route53.Options) {
		if s.Endpoint != "" {
			o.BaseEndpoint = aws.String(s.Endpoint)
		}
	})
	p.clients[key] = c
	return c, s.HostedZoneID, nil
}

// loadConfigTimeout bounds reading the AWS configuration (files and
// environment; credentials are fetched later, on a call).
const loadConfigTimeout = 10 * time.Second
