package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// managedClusterColumns are the table of the inventory.
var managedClusterColumns = []column{field("ID", "id"), field("NAME", "name"), field("HUB", "hub.name"),
	field("JOINED", "joined"), field("AVAILABLE", "available"), field("PRODUCT", "product"),
	field("VERSION", "openshift_version"), field("REGION", "region"), field("STALE", "stale")}

// changeColumns are the table of the change feed: what happened, then the cluster.
var changeColumns = append([]column{{header: "CHANGE", value: func(obj map[string]any) string {
	if lookup(obj, "deleted_at") != nil {
		return "deleted"
	}
	return "updated"
}}}, nested("cluster", managedClusterColumns)...)

// nested reads cols from the object at key.
func nested(key string, cols []column) []column {
	out := make([]column, len(cols))
	for i, c := range cols {
		value := c.value
		out[i] = column{header: c.header, value: func(obj map[string]any) string {
			inner, _ := obj[key].(map[string]any)
			return value(inner)
		}}
	}
	return out
}

func (a *app) inventoryCommand() *cobra.Command {
	cmd := group(&cobra.Command{Use: "inventory", Aliases: []string{"managed-clusters"},
		Short: "Read the fleet's inventory: the managed clusters the hubs report"})
	cmd.AddCommand(a.inventoryList(), a.inventoryGet(), a.inventoryWatch())
	return cmd
}

func (a *app) inventoryList() *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the managed clusters you may see",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.list(cmd.Context(), &lf, managedClusterColumns, func(ctx context.Context, page int) (*http.Response, []byte, error) {
				p := &public.ListManagedClustersParams{}
				p.Page, p.Size, p.Search, p.OrderBy = lf.params(page)
				r, err := a.public.ListManagedClustersWithResponse(ctx, p)
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

func (a *app) inventoryGet() *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "Show a managed cluster",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.show(cmd.Context(), managedClusterColumns, func(ctx context.Context) (*http.Response, []byte, error) {
				r, err := a.public.GetManagedClusterWithResponse(ctx, args[0])
				if err != nil {
					return nil, nil, err
				}
				return r.HTTPResponse, r.Body, nil
			})
		},
	}
}

func (a *app) inventoryWatch() *cobra.Command {
	var after string
	var fromStart bool
	var wait time.Duration
	var size int
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Follow the inventory's change feed (long-polled) until interrupted",
		Long: `Follow GET /managed_clusters/changes: print each managed cluster as it changes or
is deleted, long-polling for the next changes, until interrupted (Ctrl-C,
exit 0). It starts from now, from --after CURSOR (a list's or a previous
watch's cursor), or from the start of the retained history with --from-start.
-o json prints one change per line; -o yaml one document per change.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			cursor, err := a.watchStart(ctx, after, fromStart)
			if err != nil {
				return err
			}
			header := true
			for {
				var page *public.ManagedClusterChangeList
				_, _, err := a.do(ctx, func(ctx context.Context) (*http.Response, []byte, error) {
					w := wait.String()
					p := &public.ListManagedClusterChangesParams{After: cursor, Wait: &w}
					if size > 0 {
						p.Size = &size
					}
					r, err := a.public.ListManagedClusterChangesWithResponse(ctx, p)
					if err != nil {
						return nil, nil, err
					}
					page = r.JSON200
					return r.HTTPResponse, r.Body, nil
				})
				if ctx.Err() != nil {
					return nil
				}
				if err != nil {
					return err
				}
				if page == nil {
					return errors.New("the change feed's answer is not a page of changes")
				}
				if err := a.printChanges(page.Items, header); err != nil {
					return err
				}
				header = header && len(page.Items) == 0
				cursor = &page.Cursor
			}
		},
	}
	cmd.Flags().StringVar(&after, "after", "", "the cursor to start after")
	cmd.Flags().BoolVar(&fromStart, "from-start", false, "start from the retained history's start")
	cmd.Flags().DurationVar(&wait, "poll-wait", 30*time.Second, "how long each long-poll waits for a change")
	cmd.Flags().IntVar(&size, "size", 0, "at most this many changes per poll (default: the server's)")
	cmd.MarkFlagsMutuallyExclusive("after", "from-start")
	return cmd
}

// watchStart returns the cursor a watch starts after: --after, none for
// --from-start, or the cursor of a list, for now.
func (a *app) watchStart(ctx context.Context, after string, fromStart bool) (*string, error) {
	switch {
	case after != "":
		return &after, nil
	case fromStart:
		return nil, nil
	}
	var cursor *string
	_, _, err := a.do(ctx, func(ctx context.Context) (*http.Response, []byte, error) {
		one := 1
		r, err := a.public.ListManagedClustersWithResponse(ctx, &public.ListManagedClustersParams{Size: &one})
		if err != nil {
			return nil, nil, err
		}
		if r.JSON200 != nil {
			cursor = r.JSON200.Cursor
		}
		return r.HTTPResponse, r.Body, nil
	})
	return cursor, err
}

// printChanges prints a page of changes: table rows (a header before the
// first), one JSON object per line, or one YAML document each.
func (a *app) printChanges(items []public.ManagedClusterChange, header bool) error {
	if len(items) == 0 {
		return nil
	}
	switch a.output {
	case formatJSON:
		for _, it := range items {
			b, err := json.Marshal(it)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(a.stdout, "%s\n", b); err != nil {
				return err
			}
		}
		return nil
	case formatYAML:
		for _, it := range items {
			b, err := yaml.Marshal(it)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(a.stdout, "---\n%s", b); err != nil {
				return err
			}
		}
		return nil
	}
	objs := make([]map[string]any, 0, len(items))
	for _, it := range items {
		b, err := json.Marshal(it)
		if err != nil {
			return err
		}
		var obj map[string]any
		if err := decode(b, &obj); err != nil {
			return err
		}
		objs = append(objs, obj)
	}
	p := a.printer()
	if header {
		return p.table(objs, changeColumns)
	}
	return p.rows(objs, changeColumns)
}
