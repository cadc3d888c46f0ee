package dnstest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// sigV4 is the only signing algorithm Route53 accepts.
const sigV4 = "AWS4-HMAC-SHA256"

// maxClockSkew is how far a request's X-Amz-Date may be from the server's
// clock (AWS's limit).
const maxClockSkew = 15 * time.Minute

// sigV4Header is an Authorization header's parts.
type sigV4Header struct {
	accessKey, date, region, service, signedHeaders, signature string
}

// parseSigV4 splits "AWS4-HMAC-SHA256 Credential=AKID/date/region/service/aws4_request,
// SignedHeaders=a;b, Signature=hex".
func parseSigV4(h string) (sigV4Header, bool) {
	var p sigV4Header
	rest, ok := strings.CutPrefix(h, sigV4+" ")
	if !ok {
		return p, false
	}
	for field := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(field), "=")
		switch k {
		case "Credential":
			scope := strings.Split(v, "/")
			if len(scope) != 5 || scope[4] != "aws4_request" {
				return p, false
			}
			p.accessKey, p.date, p.region, p.service = scope[0], scope[1], scope[2], scope[3]
		case "SignedHeaders":
			p.signedHeaders = v
		case "Signature":
			p.signature = v
		}
	}
	return p, p.accessKey != "" && p.signedHeaders != "" && p.signature != ""
}

// verifySignature checks a request's Signature Version 4 as AWS does: the
// access key is the server's, the scope Route53's in the server's region,
// the date recent, and the signature the one the SDK's signer computes
// from the request's signed headers and body with the server's secret.
func (s *Route53Server) verifySignature(r *http.Request, body []byte) *apiError {
	denied := func(code, msg string) *apiError {
		return &apiError{status: http.StatusForbidden, code: code, message: msg}
	}
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return denied("MissingAuthenticationToken", "Missing Authentication Token")
	}
	p, ok := parseSigV4(auth)
	if !ok {
		return denied("IncompleteSignature", "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters.")
	}
	if p.accessKey != s.AccessKeyID {
		return denied("InvalidClientTokenId", "The security token included in the request is invalid.")
	}
	if p.region != s.Region || p.service != "route53" {
		return denied("SignatureDoesNotMatch", "Credential should be scoped to a valid region and to service 'route53'.")
	}
	signedAt, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || !strings.HasPrefix(r.Header.Get("X-Amz-Date"), p.date) {
		return denied("IncompleteSignature", "The request must hold an X-Amz-Date header of the credential's date.")
	}
	if d := time.Since(signedAt); d > maxClockSkew || d < -maxClockSkew {
		return denied("SignatureDoesNotMatch", "Signature expired: the request's date is too far from the server's clock.")
	}
	// The signer signs every header it is given: give it the signed ones.
	again, err := http.NewRequest(r.Method, "http://"+r.Host+r.RequestURI, bytes.NewReader(body))
	if err != nil {
		return denied("IncompleteSignature", "The request's URI cannot be signed.")
	}
	again.ContentLength = r.ContentLength
	for name := range strings.SplitSeq(p.signedHeaders, ";") {
		if name != "host" && name != "content-length" {
			again.Header[http.CanonicalHeaderKey(name)] = r.Header.Values(name)
		}
	}
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, again, hex.EncodeToString(sum[:]), p.service, p.region, signedAt); err != nil {
		return denied("IncompleteSignature", "The request cannot be signed.")
	}
	want, _ := parseSigV4(again.Header.Get("Authorization"))
	if want.signedHeaders != p.signedHeaders || subtle.ConstantTimeCompare([]byte(want.signature), []byte(p.signature)) != 1 {
		return denied("SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided. "+
			"Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
	}
	return nil
}
