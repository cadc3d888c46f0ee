// Package httpserve runs plain HTTP servers for both binaries: binding every
// socket before anything is served, serving until the context ends, and a
// graceful shutdown; and the two small servers both binaries run beside their
// work, the health probes and the metrics endpoint. It knows nothing of the
// API: the API server is internal/rest's, and the agent links this package
// without it.
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Timeouts are an http.Server's timeouts.
type Timeouts struct {
	ReadHeader time.Duration
	Read       time.Duration
	Write      time.Duration
	Idle       time.Duration
}

// DefaultTimeouts returns the timeouts both binaries start from.
func DefaultTimeouts() Timeouts {
	return Timeouts{ReadHeader: 10 * time.Second, Read: 60 * time.Second, Write: 2 * time.Minute, Idle: 2 * time.Minute}
}

// NewHTTPServer returns an http.Server with timeouts t, whose own errors
// (a bad TLS handshake, a panicking handler) go to logger as warnings.
func NewHTTPServer(t Timeouts, handler http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// Listener is one server with the address it was configured for, and the
// flag that configured it (without its dashes), which a bind error names.
type Listener struct {
	Name    string
	Address string
	Flag    string
	Server  *http.Server
}

// Bound is a listener whose socket is open.
type Bound struct {
	Listener
	net net.Listener
}

// Addr returns the address the socket is bound to (with the real port when
// the configured one was 0).
func (b Bound) Addr() string { return b.net.Addr().String() }

// Close closes the socket of a listener that will not be served.
func (b Bound) Close() error { return b.net.Close() }

// Bind opens every listener's socket, so that a port already in use fails the
// start, before anything is served.
func Bind(listeners ...Listener) ([]Bound, error) {
	var bound []Bound
	for _, l := range listeners {
		ln, err := net.Listen("tcp", l.Address)
		if err != nil {
			for _, b := range bound {
				_ = b.net.Close()
			}
			err = fmt.Errorf("Bind(%s on %s): %w", l.Name, l.Address, err)
			if l.Flag != "" {
				err = fmt.Errorf("--%s: %w", l.Flag, err)
			}
			return nil, err
		}
		bound = append(bound, Bound{Listener: l, net: ln})
	}
	return bound, nil
}

// Serve serves every bound listener until ctx is done, then shuts them all
// down gracefully: no new connections, in-flight requests get up to
// shutdownTimeout to finish. It returns the first serving error, or the
// shutdown's error, or nil after a clean shutdown.
func Serve(ctx context.Context, logger *slog.Logger, shutdownTimeout time.Duration, bound ...Bound) error {
	errs := make(chan error, len(bound))
	for _, b := range bound {
		logger.Info("listening", "server", b.Name, "address", b.Addr())
		go func() {
			if err := b.Server.Serve(b.net); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("Serve(%s): %w", b.Name, err)
			}
		}()
	}
	var serveErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down", "timeout", shutdownTimeout)
	case serveErr = <-errs:
		logger.Error("server failed, shutting down", "error", serveErr)
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	var shutdownErrs []error
	for _, b := range bound {
		if err := b.Server.Shutdown(shutdownCtx); err != nil {
			shutdownErrs = append(shutdownErrs, fmt.Errorf("Shutdown(%s): %w", b.Name, err))
		}
	}
	if serveErr != nil {
		return serveErr
	}
	return errors.Join(shutdownErrs...)
}
