package cli

import (
	"context"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// poolColumns are the table of capacity pools.
var poolColumns = []column{field("ID", "id"), field("NAME", "name"), field("CLOUD", "cloud"), field("ZONE", "zone"),
	field("REGION", "region"), field("CLUSTERS", "cluster_count"), field("MIN", "min_clusters"), field("MAX", "max_clusters"),
	field("RESERVED", "reserved_units"), field("PHASE", "phase")}

// reservationColumns are the table of reservations.
var reservationColumns = []column{field("ID", "id"), field("POOL", "pool_id"), field("CLUSTER", "cluster_id"),
	field("UNITS", "units"), field("INSTANCE", "instance_id"), field("CREATED", "created_at")}

func (a *app) poolsCommand() *cobra.Command {
	cmd := group(&cobra.Command{Use: "pools", Aliases: []string{"pool", "capacity-pools"}, Short: "Read capacity pools"})
	var lf listFlags
	list := &cobra.Command{
		Use:   "list",
		Short: "List your organisation's capacity pools",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.list(cmd.Context(), &lf, poolColumns, func(ctx context.Context, page int) (*http.Response, []byte, error) {
				p := &public.ListCapacityPoolsParams{}
				p.Page, p.Size, p.Search, p.OrderBy = lf.params(page)
				r, err := a.public.ListCapacityPoolsWithResponse(ctx, p)
				if err != nil {
					return nil, nil, err
				}
				return r.HTTPResponse, r.Body, nil
			})
		},
	}
	lf.add(list, true)
	get := &cobra.Command{
		Use:   "get ID",
		Short: "Show a capacity pool",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.show(cmd.Context(), poolColumns, func(ctx context.Context) (*http.Response, []byte, error) {
				r, err := a.public.GetCapacityPoolWithResponse(ctx, args[0])
				if err != nil {
					return nil, nil, err
				}
				return r.HTTPResponse, r.Body, nil
			})
		},
	}
	cmd.AddCommand(list, get)
	return cmd
}

func (a *app) reservationsCommand() *cobra.Command {
	var pool string
	cmd := group(&cobra.Command{Use: "reservations", Aliases: []string{"reservation"},
		Short: "Book and release room for service instances on a capacity pool"})
	cmd.PersistentFlags().StringVar(&pool, "pool", "", "the capacity pool's id")
	// Checked by each subcommand, not marked required: `reservations` alone prints its help.
	needPool := func() error {
		if pool == "" {
			return &exitError{code: ExitLocal, msg: "reservations needs --pool ID"}
		}
		return nil
	}

	var lf listFlags
	list := &cobra.Command{
		Use:   "list --pool ID",
		Short: "List a pool's reservations",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needPool(); err != nil {
				return err
			}
			return a.list(cmd.Context(), &lf, reservationColumns, func(ctx context.Context, page int) (*http.Response, []byte, error) {
				p := &public.ListReservationsParams{}
				p.Page, p.Size, p.Search, p.OrderBy = lf.params(page)
				r, err := a.public.ListReservationsWithResponse(ctx, pool, p)
				if err != nil {
					return nil, nil, err
				}
				return r.HTTPResponse, r.Body, nil
			})
		},
	}
	lf.add(list, true)

	var units int
	var instance string
	create := &cobra.Command{
		Use:   "create --pool ID --units N [--instance-id ID]",
		Short: "Book room on a pool: the answer names the cluster the instance goes to",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needPool(); err != nil {
				return err
			}
			return a.show(cmd.Context(), reservationColumns, func(ctx context.Context) (*http.Response, []byte, error) {
				r, err := a.public.CreateReservationWithResponse(ctx, pool, public.ReservationCreate{Units: units, InstanceId: optional(instance)})
				if err != nil {
					return nil, nil, err
				}
				return r.HTTPResponse, r.Body, nil
			})
		},
	}
	create.Flags().IntVar(&units, "units", 0, "how many units to book")
	create.Flags().StringVar(&instance, "instance-id", "", "the service instance the room is for")
	_ = create.MarkFlagRequired("units")

	del := &cobra.Command{
		Use:   "delete --pool ID RESERVATION_ID",
		Short: "Release a reservation",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := needPool(); err != nil {
				return err
			}
			return a.show(cmd.Context(), nil, func(ctx context.Context) (*http.Response, []byte, error) {
				r, err := a.public.DeleteReservationWithResponse(ctx, pool, args[0])
				if err != nil {
					return nil, nil, err
				}
				return r.HTTPResponse, r.Body, nil
			})
		},
	}
	cmd.AddCommand(list, create, del)
	return cmd
}
