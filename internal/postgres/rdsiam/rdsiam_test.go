package rdsiam_test

import (
	"context"
	"errors"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/fleetmanager/fleet-manager/internal/postgres/rdsiam"
)

// TestRDSTokensArePresignedConnectRequests checks the token's shape: a
// SigV4-presigned rds-db connect request for the endpoint and user, signed
// with the given credentials in the given region.
func TestRDSTokensArePresignedConnectRequests(t *testing.T) {
	t.Parallel()
	creds := credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "")
	tokens := rdsiam.Tokens("eu-west-1", creds)
	const host = "fleet.abc123.eu-west-1.rds.amazonaws.com"
	token, err := tokens(t.Context(), host, 5432, "fleet_manager")
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	rest, ok := strings.CutPrefix(token, host+":5432?")
	if !ok {
		t.Fatalf("token %q does not start with %s:5432?", token, host)
	}
	q, err := url.ParseQuery(rest)
	if err != nil {
		t.Fatalf("token query %q: %v", rest, err)
	}
	want := map[string]*regexp.Regexp{
		"Action":              regexp.MustCompile(`^connect$`),
		"DBUser":              regexp.MustCompile(`^fleet_manager$`),
		"X-Amz-Algorithm":     regexp.MustCompile(`^AWS4-HMAC-SHA256$`),
		"X-Amz-Credential":    regexp.MustCompile(`^AKIDEXAMPLE/[0-9]{8}/eu-west-1/rds-db/aws4_request$`),
		"X-Amz-Expires":       regexp.MustCompile(`^900$`),
		"X-Amz-Signature":     regexp.MustCompile(`^[0-9a-f]{64}$`),
		"X-Amz-SignedHeaders": regexp.MustCompile(`^host$`),
	}
	for k, re := range want {
		if v := q.Get(k); !re.MatchString(v) {
			t.Errorf("token %s = %q, want %s", k, v, re)
		}
	}
	other, err := rdsiam.Tokens("us-east-1", creds)(t.Context(), host, 5432, "fleet_manager")
	if err != nil || other == token {
		t.Errorf("token for another region = %q, %v; want a different one", other, err)
	}

	failing := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{}, errors.New("no web identity token")
	})
	if _, err := rdsiam.Tokens("eu-west-1", failing)(t.Context(), host, 5432, "u"); err == nil || !strings.Contains(err.Error(), "no web identity token") {
		t.Errorf("token without credentials: err = %v, want the credentials' error", err)
	}
}
