package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// readClient sends the scenarios' requests with its bearer token: an
// administrator's, or benchOrg's for the (org) scenarios.
type readClient struct {
	base   string
	bearer func(context.Context, *http.Request) error
	http   *http.Client
}

// get fetches path and returns its body, failing on any status but 200.
func (c *readClient) get(ctx context.Context, path string) ([]byte, error) {
	var body bytes.Buffer
	err := c.getInto(ctx, path, &body)
	return body.Bytes(), err
}

// getInto fetches path into body, which it resets first, failing on any
// status but 200. The scenarios' clients reuse their body, so that the
// benchmark's own allocations take little of the CPU it shares with the
// server and the database.
func (c *readClient) getInto(ctx context.Context, path string, body *bytes.Buffer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return err
	}
	if err := c.bearer(ctx, req); err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body.Reset()
	_, err = body.ReadFrom(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s = %s: %s", path, resp.Status, truncate(body.String(), 300))
	}
	return err
}

// specPaths returns the paths of the served OpenAPI document.
func (c *readClient) specPaths(ctx context.Context) (map[string]bool, error) {
	body, err := c.get(ctx, "/openapi")
	if err != nil {
		return nil, err
	}
	var spec struct {
		Paths map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(body, &spec); err != nil {
		return nil, fmt.Errorf("GET /openapi: %w", err)
	}
	paths := map[string]bool{}
	for p := range spec.Paths {
		paths[p] = true
	}
	return paths, nil
}

// leadingString reads the string member key of the JSON object in body,
// decoding the members before it and stopping there: the change feed's
// answer begins with its cursor, so a client need not decode its 100
// clusters to follow it.
func leadingString(body []byte, key string) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	for dec.More() {
		name, err := dec.Token()
		if err != nil {
			return "", false
		}
		if name == key {
			var value string
			return value, dec.Decode(&value) == nil
		}
		var skipped json.RawMessage
		if dec.Decode(&skipped) != nil {
			return "", false
		}
	}
	return "", false
}
