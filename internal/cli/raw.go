package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) getCommand() *cobra.Command {
	var params []string
	var search, orderBy string
	cmd := &cobra.Command{
		Use:   "get PATH",
		Short: "GET any path of the API and print the answer (JSON, or YAML with -o yaml)",
		Long: `GET any path of the API, as ` + "`ocm get`" + ` does: a path from / is taken from the
server's root (/api/fleet_manager/v1/clusters), another one from the API's base
(clusters, admin/hubs). The answer is printed as JSON (or YAML with -o yaml).`,
		Example: `  fleetctl get /api/fleet_manager/v1/clusters --search "labels.env = 'prod'"
  fleetctl get managed_clusters --parameter size=10
  fleetctl get /api/fleet_manager/v1/admin/hubs -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := a.connect(ctx); err != nil {
				return err
			}
			target, err := a.rawURL(args[0], params, search, orderBy)
			if err != nil {
				return err
			}
			_, body, err := a.do(ctx, func(ctx context.Context) (*http.Response, []byte, error) {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
				if err != nil {
					return nil, nil, err
				}
				req.Header.Set("Accept", "application/json")
				resp, err := a.http.Do(req)
				if err != nil {
					return nil, nil, err
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				return resp, b, err
			})
			if err != nil {
				return err
			}
			p := a.printer()
			if p.format == formatTable {
				p.format = formatJSON
			}
			return p.raw(body)
		},
	}
	cmd.Flags().StringArrayVar(&params, "parameter", nil, "a query parameter name=value (repeat)")
	cmd.Flags().StringVar(&search, "search", "", "the search parameter")
	cmd.Flags().StringVar(&orderBy, "order-by", "", "the orderBy parameter")
	return cmd
}

// rawURL resolves path against the API's base (or its server root, for a
// path from /) and adds the query parameters.
func (a *app) rawURL(path string, params []string, search, orderBy string) (string, error) {
	base, err := url.Parse(a.cfg.URL)
	if err != nil {
		return "", err
	}
	ref, err := url.Parse(path)
	if err != nil || ref.Scheme != "" || ref.Host != "" {
		return "", &exitError{code: ExitLocal, msg: "get takes a path of the API, e.g. /api/fleet_manager/v1/clusters"}
	}
	u := *base
	u.RawQuery = ref.RawQuery
	if strings.HasPrefix(ref.Path, "/") {
		u.Path = ref.Path
	} else {
		u.Path = strings.TrimRight(base.Path, "/") + "/" + ref.Path
	}
	q := u.Query()
	for _, p := range params {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return "", &exitError{code: ExitLocal, msg: fmt.Sprintf("--parameter takes name=value, not %q", p)}
		}
		q.Add(k, v)
	}
	if search != "" {
		q.Set("search", search)
	}
	if orderBy != "" {
		q.Set("orderBy", orderBy)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}
