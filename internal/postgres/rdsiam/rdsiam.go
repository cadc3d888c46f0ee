// Package rdsiam signs RDS IAM authentication tokens, the password of each
// new connection with --db-iam-auth (docs/database-rds.md). Signing is
// local: it needs the AWS credentials, not the network (credentials that
// expire are refreshed by their provider). postgres.Config decides when a
// connection takes a token; this package only makes one.
package rdsiam

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/rds/auth"
)

// Signer returns a token for a new connection to host:port as user.
type Signer func(ctx context.Context, host string, port uint16, user string) (string, error)

// Tokens returns a Signer that signs an RDS IAM authentication token for
// each connection with creds, for an instance in region.
func Tokens(region string, creds aws.CredentialsProvider) Signer {
	return func(ctx context.Context, host string, port uint16, user string) (string, error) {
		endpoint := net.JoinHostPort(host, strconv.Itoa(int(port)))
		token, err := auth.BuildAuthToken(ctx, endpoint, region, user, creds)
		if err != nil {
			return "", fmt.Errorf("BuildAuthToken(%s, %s): %w", endpoint, user, err)
		}
		return token, nil
	}
}

// DefaultTokens returns Tokens with the AWS SDK's default credential chain
// (environment, the web identity of the pod's service account, an instance
// profile) for an instance in region.
func DefaultTokens(ctx context.Context, region string) (Signer, error) {
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(region))
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	return Tokens(region, awsCfg.Credentials), nil
}
