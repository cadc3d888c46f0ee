package main

import (
	"github.com/spf13/pflag"

	"github.com/fleetmanager/fleet-manager/internal/agent"
	"github.com/fleetmanager/fleet-manager/internal/config"
)

// runOptions is the whole configuration of `run`.
type runOptions struct {
	Log   config.Log
	Agent agent.Config
}

func defaultRunOptions() runOptions {
	return runOptions{Log: config.DefaultLog(), Agent: agent.DefaultConfig()}
}

func (o *runOptions) addFlags(fs *pflag.FlagSet) {
	o.Log.AddFlags(fs)
	o.Agent.AddFlags(fs)
}

// validate reports every problem of every part at once.
func (o runOptions) validate() error {
	var p config.Problems
	p.Merge(o.Log.Validate())
	p.Merge(o.Agent.Validate())
	return p.Err()
}
