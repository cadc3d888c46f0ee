package cli

import (
	"bytes"
	"context"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// policyColumns are the table of configuration policies.
var policyColumns = []column{field("ID", "id"), field("NAME", "name"), field("ZONE", "zone"),
	field("SELECTOR", "placement.label_selector.match_labels"), field("HUBS", "hub_count"), field("UPDATED", "updated_at")}

// complianceColumns are the table of a policy's compliance per cluster.
var complianceColumns = []column{field("CLUSTER", "cluster_name"), field("HUB", "hub.name"), field("STATE", "state"),
	field("REGISTRATION", "registration_id"), field("UPDATED", "updated_at")}

func (a *app) policiesCommand() *cobra.Command {
	cmd := group(&cobra.Command{Use: "policies", Aliases: []string{"policy"},
		Short: "Keep configuration policies: an RHACM Policy and the clusters it selects"})
	cmd.AddCommand(a.policiesList(), a.policiesGet(), a.policiesCreate(), a.policiesUpdate(), a.policiesDelete(), a.policiesCompliance())
	return cmd
}

func (a *app) policiesList() *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List your organisation's policies",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.list(cmd.Context(), &lf, policyColumns, func(ctx context.Context, page int) (*http.Response, []byte, error) {
				p := &public.ListPoliciesParams{}
				p.Page, p.Size, p.Search, p.OrderBy = lf.params(page)
				r, err := a.public.ListPoliciesWithResponse(ctx, p)
				if err != nil {
					return nil, nil, err
				}
				return r.HTTPResponse, r.Body, nil
			})
		},
	}
	lf.add(cmd, true)
	return cmd
}

func (a *app) policiesGet() *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "Show a policy",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.show(cmd.Context(), policyColumns, func(ctx context.Context) (*http.Response, []byte, error) {
				r, err := a.public.GetPolicyWithResponse(ctx, args[0])
				if err != nil {
					return nil, nil, err
				}
				return r.HTTPResponse, r.Body, nil
			})
		},
	}
}

func (a *app) policiesCreate() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:     "create -f FILE",
		Short:   "Create a policy from a file (JSON or YAML: policy, placement and zone)",
		Example: `  fleetctl policies create -f policy.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body, err := readBody(file, cmd.InOrStdin())
			if err != nil {
				return err
			}
			return a.show(cmd.Context(), policyColumns, func(ctx context.Context) (*http.Response, []byte, error) {
				r, err := a.public.CreatePolicyWithBodyWithResponse(ctx, "application/json", bytes.NewReader(body))
				if err != nil {
					return nil, nil, err
				}
				return r.HTTPResponse, r.Body, nil
			})
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "a JSON or YAML file of the PolicyCreate (- for stdin)")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func (a *app) policiesUpdate() *cobra.Command {
	var file, ifMatch string
	cmd := &cobra.Command{
		Use:   "update ID -f FILE",
		Short: "Change a policy's Policy, placement or both from a file (JSON or YAML), by PATCH",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := readBody(file, cmd.InOrStdin())
			if err != nil {
				return err
			}
			return a.show(cmd.Context(), policyColumns, func(ctx context.Context) (*http.Response, []byte, error) {
				r, err := a.public.PatchPolicyWithBodyWithResponse(ctx, args[0], &public.PatchPolicyParams{IfMatch: optional(ifMatch)},
					"application/json", bytes.NewReader(body))
				if err != nil {
					return nil, nil, err
				}
				return r.HTTPResponse, r.Body, nil
			})
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "a JSON or YAML file of the PolicyPatch: policy, placement or both (- for stdin)")
	cmd.Flags().StringVar(&ifMatch, "if-match", "", "the ETag the change is based on; another version answers 412")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func (a *app) policiesDelete() *cobra.Command {
	return &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a policy; the agents remove it from the hubs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.show(cmd.Context(), nil, func(ctx context.Context) (*http.Response, []byte, error) {
				r, err := a.public.DeletePolicyWithResponse(ctx, args[0], &public.DeletePolicyParams{})
				if err != nil {
					return nil, nil, err
				}
				return r.HTTPResponse, r.Body, nil
			})
		},
	}
}

func (a *app) policiesCompliance() *cobra.Command {
	var lf listFlags
	var summary bool
	cmd := &cobra.Command{
		Use:   "compliance [ID]",
		Short: "Show a policy's compliance per cluster, or (--summary, or no ID) the fleet's counts",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if summary || len(args) == 0 {
				p := &public.GetComplianceSummaryParams{}
				if len(args) == 1 {
					p.PolicyId = &args[0]
				}
				// The summary has no table: it prints as JSON or YAML.
				return a.show(cmd.Context(), nil, func(ctx context.Context) (*http.Response, []byte, error) {
					r, err := a.public.GetComplianceSummaryWithResponse(ctx, p)
					if err != nil {
						return nil, nil, err
					}
					return r.HTTPResponse, r.Body, nil
				})
			}
			return a.list(cmd.Context(), &lf, complianceColumns, func(ctx context.Context, page int) (*http.Response, []byte, error) {
				p := &public.ListPolicyComplianceParams{}
				p.Page, p.Size, p.Search, p.OrderBy = lf.params(page)
				r, err := a.public.ListPolicyComplianceWithResponse(ctx, args[0], p)
				if err != nil {
					return nil, nil, err
				}
				return r.HTTPResponse, r.Body, nil
			})
		},
	}
	cmd.Flags().BoolVar(&summary, "summary", false, "the counts per zone and hub instead of the clusters")
	lf.add(cmd, true)
	return cmd
}
