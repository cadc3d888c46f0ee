package main

import (
	"log/slog"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/config"
	"github.com/fleetmanager/fleet-manager/internal/rest"
)

// newLogger is the logger of every command: JSON or text at --log-level on
// the command's stderr, every line carrying the fork's service name
// (--service-name, the same for serve, migrate, rotate-keys and doctor) and
// the command that wrote it.
func newLogger(cmd *cobra.Command, o config.Log, service string) *slog.Logger {
	return o.NewLogger(cmd.ErrOrStderr(), service).With("command", cmd.Name())
}

// serviceName is the --service-name of the commands other than serve, which
// reads it into rest.Config: the same flag and variable
// (FLEET_MANAGER_SERVICE_NAME), the same default and rule.
type serviceName string

func defaultServiceName() serviceName { return serviceName(rest.DefaultConfig().ServiceName) }

func (s *serviceName) addFlags(fs *pflag.FlagSet) {
	fs.StringVar((*string)(s), "service-name", string(*s), "service name, used in logs (serve's too)")
}

// Validate applies serve's rule.
func (s serviceName) Validate() error { return rest.ValidateServiceName(string(s)) }
