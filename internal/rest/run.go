package rest

import "github.com/fleetmanager/fleet-manager/internal/httpserve"

// ServerTimeouts returns the configured timeouts of the three servers, for
// httpserve.NewHTTPServer. Binding, serving and shutting down are
// internal/httpserve's, which the agent shares without linking the API server.
func (c Config) ServerTimeouts() httpserve.Timeouts {
	return httpserve.Timeouts{ReadHeader: c.ReadHeaderTimeout, Read: c.ReadTimeout, Write: c.WriteTimeout, Idle: c.IdleTimeout}
}
