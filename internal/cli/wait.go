package cli

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// waitCluster follows registration id until it is ready (or, with gone, until
// it no longer exists), printing a progress line to stderr whenever its phase
// or conditions change. It returns the last body read; the error of a failed
// registration or of the timeout has exit code ExitWait.
func (a *app) waitCluster(ctx context.Context, id string, gone bool, wf waitFlags) ([]byte, error) {
	deadline := time.Now().Add(wf.timeout)
	last, name := "", id
	for {
		var c *public.Cluster
		resp, body, err := a.do(ctx, func(ctx context.Context) (*http.Response, []byte, error) {
			r, err := a.public.GetClusterWithResponse(ctx, id)
			if err != nil {
				return nil, nil, err
			}
			c = r.JSON200
			return r.HTTPResponse, r.Body, nil
		})
		switch {
		case gone && resp != nil && resp.StatusCode == http.StatusNotFound:
			fmt.Fprintf(a.stderr, "%s %s gone\n", time.Now().UTC().Format(time.TimeOnly), name)
			return nil, nil
		case err != nil:
			return nil, err
		case c == nil:
			return nil, fmt.Errorf("GET /clusters/%s: the answer is not a cluster", id)
		}
		name = c.Name
		if line := progressLine(c); line != last {
			fmt.Fprintf(a.stderr, "%s %s\n", time.Now().UTC().Format(time.TimeOnly), line)
			last = line
		}
		switch {
		case !gone && c.Phase == public.Ready:
			return body, nil
		case c.Phase == public.Failed:
			return body, &exitError{code: ExitWait, msg: fmt.Sprintf("cluster %s failed: %s", c.Name, failure(c))}
		case !time.Now().Before(deadline):
			return body, &exitError{code: ExitWait, msg: fmt.Sprintf("cluster %s is still %s after --timeout %s", c.Name, c.Phase, wf.timeout)}
		}
		t := time.NewTimer(min(wf.interval, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return body, ctx.Err()
		case <-t.C:
		}
	}
}

// progressLine is a registration's name, phase and conditions on one line.
func progressLine(c *public.Cluster) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", c.Name, c.Phase)
	if c.Hub != nil {
		fmt.Fprintf(&b, " on %s", c.Hub.Name)
	}
	for i, cond := range c.Conditions {
		sep := " "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%s%s=%s", sep, cond.Type, cond.Status)
		if cond.Status != public.ConditionStatusTrue && cond.Reason != "" {
			b.WriteString(":" + cond.Reason)
		}
	}
	return b.String()
}

// failure names the conditions that are False, with their reasons and messages.
func failure(c *public.Cluster) string {
	var parts []string
	for _, cond := range c.Conditions {
		if cond.Status == public.ConditionStatusFalse {
			s := cond.Type + " " + cond.Reason
			if cond.Message != nil && *cond.Message != "" {
				s += " (" + *cond.Message + ")"
			}
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return "no condition says why"
	}
	return strings.Join(parts, "; ")
}
