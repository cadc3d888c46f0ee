package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/fleetmanager/fleet-manager/pkg/api/admin"
)

// hubColumns are the table of hubs.
var hubColumns = []column{field("ID", "id"), field("NAME", "name"), field("ZONE", "zone"), field("REGION", "region"),
	field("DELIVERY", "delivery_mode"), field("PLACED", "placed_count"), field("CAPACITY", "capacity"),
	field("CORDONED", "cordoned"), field("REVISION", "revision"), field("APPLIED", "applied_revision"), conditionsColumn()}

func (a *app) hubsCommand() *cobra.Command {
	cmd := group(&cobra.Command{Use: "hubs", Aliases: []string{"hub"}, Short: "Register, list and cordon RHACM hubs (admin API)"})
	cmd.AddCommand(a.hubsList(), a.hubsGet(), a.hubsRegister(), a.hubsCordon(true), a.hubsCordon(false))
	return cmd
}

func (a *app) hubsList() *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the hubs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.list(cmd.Context(), &lf, hubColumns, func(ctx context.Context, page int) (*http.Response, []byte, error) {
				p := &admin.ListHubsParams{}
				p.Page, p.Size, p.Search, p.OrderBy = lf.params(page)
				r, err := a.admin.ListHubsWithResponse(ctx, p)
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

func (a *app) hubsGet() *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "Show a hub",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.show(cmd.Context(), hubColumns, func(ctx context.Context) (*http.Response, []byte, error) {
				r, err := a.admin.GetHubWithResponse(ctx, args[0])
				if err != nil {
					return nil, nil, err
				}
				return r.HTTPResponse, r.Body, nil
			})
		},
	}
}

func (a *app) hubsRegister() *cobra.Command {
	var h admin.HubCreate
	var mode, agentIdentity, cloud, owner, file string
	cmd := &cobra.Command{
		Use:   "register (--name NAME --zone ZONE --region REGION --agent-identity ID | -f FILE)",
		Short: "Register a hub",
		Long: `Register an RHACM hub (POST /admin/hubs), described by flags or by -f FILE (JSON
or YAML, "-" for stdin) holding the admin API's HubCreate, e.g. for SyncSet
delivery with credentials.`,
		Example: `  fleetctl hubs register --name hub-eu-1 --zone eu --region eu-west-1 --capacity 100 --agent-identity hub-eu-1-agent`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var body []byte
			var err error
			if file != "" {
				body, err = readBody(file, cmd.InOrStdin())
			} else {
				if h.Name == "" || h.Zone == "" || h.Region == "" {
					return &exitError{code: ExitLocal, msg: "hubs register needs --name, --zone and --region (or -f FILE)"}
				}
				h.DeliveryMode = admin.DeliveryMode(mode)
				h.AgentIdentity, h.CloudProvider, h.OwnerOrgId = optional(agentIdentity), optional(cloud), optional(owner)
				body, err = json.Marshal(h)
			}
			if err != nil {
				return err
			}
			return a.show(cmd.Context(), hubColumns, func(ctx context.Context) (*http.Response, []byte, error) {
				r, err := a.admin.CreateHubWithBodyWithResponse(ctx, "application/json", bytes.NewReader(body))
				if err != nil {
					return nil, nil, err
				}
				return r.HTTPResponse, r.Body, nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&h.Name, "name", "", "the hub's name")
	f.StringVar(&h.Zone, "zone", "", "the data-sovereignty zone it serves")
	f.StringVar(&h.Region, "region", "", "its region")
	f.IntVar(&h.Capacity, "capacity", 100, "how many clusters it may hold")
	f.StringVar(&mode, "delivery-mode", string(admin.Agent), "agent, syncset-ocm or syncset-hive")
	f.StringVar(&agentIdentity, "agent-identity", "", "the agent-identity claim of the hub's fleetshard-sync token")
	f.StringVar(&cloud, "cloud-provider", "", "the hub's cloud provider")
	f.StringVar(&owner, "owner-org", "", "makes the hub customer-managed: all its clusters belong to this organisation")
	f.StringVarP(&file, "filename", "f", "", "a JSON or YAML file of the HubCreate (- for stdin)")
	_ = cmd.RegisterFlagCompletionFunc("delivery-mode", cobra.FixedCompletions([]string{"agent", "syncset-ocm", "syncset-hive"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// hubsCordon is `hubs cordon` (no new placements on the hub) or `hubs uncordon`.
func (a *app) hubsCordon(cordon bool) *cobra.Command {
	use, short := "uncordon ID", "Let the placer choose the hub again"
	if cordon {
		use, short = "cordon ID", "Stop placing new clusters on the hub; those placed stay"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.show(cmd.Context(), hubColumns, func(ctx context.Context) (*http.Response, []byte, error) {
				if cordon {
					r, err := a.admin.CordonHubWithResponse(ctx, args[0])
					if err != nil {
						return nil, nil, err
					}
					return r.HTTPResponse, r.Body, nil
				}
				r, err := a.admin.UncordonHubWithResponse(ctx, args[0])
				if err != nil {
					return nil, nil, err
				}
				return r.HTTPResponse, r.Body, nil
			})
		},
	}
}
