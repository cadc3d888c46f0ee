package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"golang.org/x/oauth2"
)

// The exit codes of fleetctl, for scripts; docs/cli.md lists them.
const (
	// ExitOK: the command did what it was asked.
	ExitOK = 0
	// ExitLocal: a usage error, or a local one (config file, input file, not logged in).
	ExitLocal = 1
	// ExitRefused: the API (or the token endpoint) refused the request with a 4xx.
	ExitRefused = 2
	// ExitServer: the server failed (5xx) or could not be reached.
	ExitServer = 3
	// ExitWait: --wait ended without success: the registration failed, or the wait timed out.
	ExitWait = 4
)

// exitError is an error with the exit code it ends fleetctl with.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// apiError is the error of an API answer that is not a success: the OCM
// error body's reason, code and operation id when the body is one.
func apiError(resp *http.Response, body []byte) error {
	code := ExitServer
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		code = ExitRefused
	}
	var e struct {
		Kind        string `json:"kind"`
		Code        string `json:"code"`
		Reason      string `json:"reason"`
		OperationID string `json:"operation_id"`
	}
	if json.Unmarshal(body, &e) != nil || e.Kind != "Error" || e.Reason == "" {
		return &exitError{code: code, msg: fmt.Sprintf("%s %s answered %s", resp.Request.Method, resp.Request.URL.Path, resp.Status)}
	}
	op := e.OperationID
	if op == "" {
		op = resp.Header.Get("X-Operation-ID")
	}
	msg := e.Reason + " (" + e.Code
	if op != "" {
		msg += ", operation " + op
	}
	return &exitError{code: code, msg: msg + ")"}
}

// exitCode returns the exit code of err and the message to print.
func exitCode(err error) (int, string) {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code, ee.msg
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		msg := "the token endpoint refused: " + strings.TrimSpace(re.ErrorCode+" "+re.ErrorDescription)
		if re.Response != nil && re.Response.StatusCode >= 500 {
			return ExitServer, msg
		}
		return ExitRefused, msg
	}
	if errors.Is(err, errNotLoggedIn) || errors.Is(err, errTokenExpired) {
		return ExitLocal, err.Error()
	}
	var te *transportError
	if errors.As(err, &te) {
		return ExitServer, err.Error()
	}
	return ExitLocal, err.Error()
}

// transportError is a request that got no answer.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }
