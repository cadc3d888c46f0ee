package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetmanager/fleet-manager/internal/auth"
)

// tokenOptions configures `token`: the claims to mint, and the auth
// configuration whose claim names and dev key the token must match.
type tokenOptions struct {
	Auth    auth.Config
	OrgID   string
	User    string
	Roles   []string
	AgentID string
	TTL     time.Duration
}

func newTokenCommand(env lookupEnv) *cobra.Command {
	opts := tokenOptions{Auth: auth.DefaultConfig(), TTL: 12 * time.Hour}
	opts.Auth.DevKeyDir = ".local/auth"
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Mint a development token signed with the local development key",
		Long: "Mint a JWT for the given org, user and roles, signed with the development key in --auth-dev-key-dir " +
			"(created on first use). `serve` trusts that key when started with the same --auth-dev-key-dir. " +
			"Production deployments point --auth-jwks-url at the real issuer and leave --auth-dev-key-dir empty.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := complete(cmd.Flags(), env, new(string)); err != nil {
				return err
			}
			if opts.Auth.DevKeyDir == "" {
				return errors.New("--auth-dev-key-dir: is required to mint a token")
			}
			if opts.User == "" && opts.AgentID == "" {
				return errors.New("--user or --agent: one is required (--user for a person, --agent for a fleetshard-sync agent)")
			}
			if opts.TTL <= 0 {
				return fmt.Errorf("--ttl: must be positive (got %s)", opts.TTL)
			}
			key, err := auth.EnsureDevKey(opts.Auth.DevKeyDir)
			if err != nil {
				return err
			}
			token, err := key.Mint(opts.Auth, auth.TokenRequest{
				OrgID: opts.OrgID, Username: opts.User, Roles: opts.Roles, AgentID: opts.AgentID, TTL: opts.TTL,
			}, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), token)
			return nil
		},
	}
	fs := cmd.Flags()
	opts.Auth.AddFlags(fs)
	fs.StringVar(&opts.OrgID, "org", "", "organisation id claim")
	fs.StringVar(&opts.User, "user", "", "username claim")
	fs.StringSliceVar(&opts.Roles, "roles", nil, "roles claim (comma-separated)")
	fs.StringVar(&opts.AgentID, "agent", "", "agent identity claim, for fleetshard-sync tokens")
	fs.DurationVar(&opts.TTL, "ttl", opts.TTL, "token lifetime")
	return cmd
}
