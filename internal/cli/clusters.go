package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// clusterColumns are the table of registrations.
var clusterColumns = []column{field("ID", "id"), field("NAME", "name"), field("PRODUCT", "product"), field("ZONE", "zone"),
	field("REGION", "region"), field("HUB", "hub.name"), field("PHASE", "phase"), conditionsColumn()}

// waitFlags are the flags of commands that can follow a registration.
type waitFlags struct {
	wait              bool
	timeout, interval time.Duration
}

func (wf *waitFlags) add(cmd *cobra.Command, what string) {
	cmd.Flags().BoolVar(&wf.wait, "wait", false, "follow the registration until "+what+", printing a line to stderr when its phase or conditions change")
	cmd.Flags().DurationVar(&wf.timeout, "timeout", 30*time.Minute, "how long --wait waits")
	cmd.Flags().DurationVar(&wf.interval, "interval", 2*time.Second, "how often --wait polls")
}

func (a *app) clustersCommand() *cobra.Command {
	cmd := group(&cobra.Command{Use: "clusters", Aliases: []string{"cluster"}, Short: "Register, list, change and deregister clusters"})
	cmd.AddCommand(a.clustersRegister(), a.clustersList(), a.clustersGet(), a.clustersUpdate(), a.clustersDeregister(), a.clustersImport())
	return cmd
}

func (a *app) clustersList() *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List your organisation's registrations",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.list(cmd.Context(), &lf, clusterColumns, func(ctx context.Context, page int) (*http.Response, []byte, error) {
				p := &public.ListClustersParams{}
				p.Page, p.Size, p.Search, p.OrderBy = lf.params(page)
				r, err := a.public.ListClustersWithResponse(ctx, p)
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

func (a *app) clustersGet() *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "Show a registration",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.show(cmd.Context(), clusterColumns, a.getCluster(args[0]))
		},
	}
}

// getCluster is GET /clusters/{id}.
func (a *app) getCluster(id string) call {
	return func(ctx context.Context) (*http.Response, []byte, error) {
		r, err := a.public.GetClusterWithResponse(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		return r.HTTPResponse, r.Body, nil
	}
}

// clusterFlags are the flags that describe a registration.
type clusterFlags struct {
	name, zone, region, product, displayName string
	labels                                   []string
	kubeconfig, apiURL, apiToken             string
	file, idempotencyKey                     string
}

// body returns the JSON body of a registration: the file of -f, or the flags.
func (cf *clusterFlags) body(stdin io.Reader) ([]byte, error) {
	if cf.file != "" {
		if cf.name != "" || cf.zone != "" || cf.region != "" || cf.displayName != "" || len(cf.labels) > 0 {
			return nil, &exitError{code: ExitLocal, msg: "-f describes the registration: give no other registration flag with it"}
		}
		return readBody(cf.file, stdin)
	}
	if cf.name == "" {
		return nil, &exitError{code: ExitLocal, msg: "register needs --name (or -f FILE)"}
	}
	c := public.ClusterCreate{Name: cf.name, Product: public.Product(cf.product)}
	if cf.zone != "" {
		c.Zone = &cf.zone
	}
	if cf.region != "" {
		c.Region = &cf.region
	}
	if cf.displayName != "" {
		c.DisplayName = &cf.displayName
	}
	if len(cf.labels) > 0 {
		labels, err := splitLabels(cf.labels)
		if err != nil {
			return nil, err
		}
		c.Labels = (*public.Labels)(&labels)
	}
	creds := public.ImportCredentials{}
	if cf.kubeconfig != "" {
		b, err := os.ReadFile(cf.kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("reading --kubeconfig: %w", err)
		}
		kc := string(b)
		creds.Kubeconfig = &kc
	}
	if cf.apiURL != "" {
		creds.ApiUrl = &cf.apiURL
	}
	if cf.apiToken != "" {
		creds.Token = &cf.apiToken
	}
	if creds != (public.ImportCredentials{}) {
		c.Credentials = &creds
	}
	return json.Marshal(c)
}

// readBody reads a JSON or YAML file ("-": stdin) and returns it as JSON.
func readBody(file string, stdin io.Reader) ([]byte, error) {
	var b []byte
	var err error
	if file == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("reading -f: %w", err)
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, &exitError{code: ExitLocal, msg: fmt.Sprintf("-f %s is neither JSON nor YAML: %v", file, err)}
	}
	return j, nil
}

func (a *app) clustersRegister() *cobra.Command {
	var cf clusterFlags
	var wf waitFlags
	cmd := &cobra.Command{
		Use:   "register (--name NAME --zone ZONE --product PRODUCT | -f FILE)",
		Short: "Register a cluster (or, with -f and an items list, many at once)",
		Long: `Register a cluster. The registration is described by flags, or by -f FILE (JSON or
YAML, "-" for stdin) holding the API's ClusterCreate; a file holding
{"items": [...]} registers them all in one request (POST /clusters:batch).

With --wait, fleetctl follows the registration until it is ready (exit 0) or
failed (exit 4), printing a line to stderr whenever its phase or conditions
change; it gives up after --timeout (exit 4).`,
		Example: `  fleetctl clusters register --name prod-1 --zone eu --region eu-west-1 --product ROSA --label env=prod --wait
  fleetctl clusters register -f clusters.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body, err := cf.body(cmd.InOrStdin())
			if err != nil {
				return err
			}
			var probe struct {
				Items json.RawMessage `json:"items"`
			}
			if json.Unmarshal(body, &probe) == nil && probe.Items != nil {
				if wf.wait {
					return &exitError{code: ExitLocal, msg: "--wait follows one registration; a batch is not followed"}
				}
				return a.show(cmd.Context(), nil, func(ctx context.Context) (*http.Response, []byte, error) {
					r, err := a.public.CreateClustersWithBodyWithResponse(ctx, &public.CreateClustersParams{IdempotencyKey: optional(cf.idempotencyKey)},
						"application/json", bytes.NewReader(body))
					if err != nil {
						return nil, nil, err
					}
					return r.HTTPResponse, r.Body, nil
				})
			}
			var id string
			_, created, err := a.do(cmd.Context(), func(ctx context.Context) (*http.Response, []byte, error) {
				r, err := a.public.CreateClusterWithBodyWithResponse(ctx, &public.CreateClusterParams{IdempotencyKey: optional(cf.idempotencyKey)},
					"application/json", bytes.NewReader(body))
				if err != nil {
					return nil, nil, err
				}
				if r.JSON202 != nil {
					id = r.JSON202.Id
				}
				return r.HTTPResponse, r.Body, nil
			})
			if err != nil {
				return err
			}
			if wf.wait {
				if created, err = a.waitCluster(cmd.Context(), id, false, wf); err != nil {
					return err
				}
			}
			return a.printer().object(created, clusterColumns)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cf.name, "name", "", "the cluster's name, a DNS label unique among your organisation's registrations")
	f.StringVar(&cf.zone, "zone", "", "the data-sovereignty zone (default: the deployment's, if it has one)")
	f.StringVar(&cf.region, "region", "", "the preferred region within the zone")
	f.StringVar(&cf.product, "product", string(public.ROSA), "the product: ROSA, OSD, ARO, OCP, ROKS, EKS, AKS, GKE or Kubernetes")
	f.StringVar(&cf.displayName, "display-name", "", "a display name")
	f.StringArrayVar(&cf.labels, "label", nil, "a label key=value, put on the hub's ManagedCluster (repeat)")
	f.StringVar(&cf.kubeconfig, "kubeconfig", "", "a kubeconfig file for automatic import (stored encrypted)")
	f.StringVar(&cf.apiURL, "api-url", "", "the cluster's API URL, with --api-token, for automatic import")
	f.StringVar(&cf.apiToken, "api-token", "", "a token for the cluster's API, with --api-url, for automatic import")
	f.StringVarP(&cf.file, "filename", "f", "", "a JSON or YAML file of the registration, or of {items: [...]} for a batch (- for stdin)")
	f.StringVar(&cf.idempotencyKey, "idempotency-key", "", "makes the request safe to retry: the same key and body answer the same registration")
	_ = cmd.RegisterFlagCompletionFunc("product", cobra.FixedCompletions([]string{"ROSA", "OSD", "ARO", "OCP", "ROKS", "EKS", "AKS", "GKE", "Kubernetes"}, cobra.ShellCompDirectiveNoFileComp))
	wf.add(cmd, "it is ready or failed")
	return cmd
}

func (a *app) clustersUpdate() *cobra.Command {
	var displayName, file, ifMatch string
	var labels []string
	cmd := &cobra.Command{
		Use:   "update ID (--display-name NAME | --label k=v ... | -f FILE)",
		Short: "Change a registration's display name or labels",
		Long: `Change a registration's display name or labels (PATCH /clusters/{id}). --label
replaces the whole set of labels with the ones given; -f FILE sends a
ClusterPatch (JSON or YAML).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var body []byte
			var err error
			if file != "" {
				if body, err = readBody(file, cmd.InOrStdin()); err != nil {
					return err
				}
			} else {
				var p public.ClusterPatch
				if cmd.Flags().Changed("display-name") {
					p.DisplayName = &displayName
				}
				if cmd.Flags().Changed("label") {
					l, err := splitLabels(labels)
					if err != nil {
						return err
					}
					p.Labels = (*public.Labels)(&l)
				}
				if p.DisplayName == nil && p.Labels == nil {
					return &exitError{code: ExitLocal, msg: "update needs --display-name, --label or -f"}
				}
				if body, err = json.Marshal(p); err != nil {
					return err
				}
			}
			return a.show(cmd.Context(), clusterColumns, func(ctx context.Context) (*http.Response, []byte, error) {
				r, err := a.public.UpdateClusterWithBodyWithResponse(ctx, args[0], &public.UpdateClusterParams{IfMatch: optional(ifMatch)}, "application/json", bytes.NewReader(body))
				if err != nil {
					return nil, nil, err
				}
				return r.HTTPResponse, r.Body, nil
			})
		},
	}
	cmd.Flags().StringVar(&displayName, "display-name", "", "the new display name")
	cmd.Flags().StringArrayVar(&labels, "label", nil, "a label key=value; the labels given replace all others (repeat)")
	cmd.Flags().StringVarP(&file, "filename", "f", "", "a JSON or YAML file of the ClusterPatch (- for stdin)")
	cmd.Flags().StringVar(&ifMatch, "if-match", "", "the ETag the change is based on; another version answers 412")
	return cmd
}

func (a *app) clustersDeregister() *cobra.Command {
	var wf waitFlags
	cmd := &cobra.Command{
		Use:     "deregister ID",
		Aliases: []string{"delete"},
		Short:   "Deregister a cluster: it is withdrawn from its hub, then gone",
		Long: `Deregister a cluster (DELETE /clusters/{id}). With --wait, fleetctl follows it
until it is gone (exit 0), printing a line to stderr whenever its phase or
conditions change; it gives up after --timeout (exit 4).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, body, err := a.do(cmd.Context(), func(ctx context.Context) (*http.Response, []byte, error) {
				r, err := a.public.DeleteClusterWithResponse(ctx, args[0])
				if err != nil {
					return nil, nil, err
				}
				return r.HTTPResponse, r.Body, nil
			})
			if err != nil {
				return err
			}
			if wf.wait {
				_, err := a.waitCluster(cmd.Context(), args[0], true, wf)
				return err
			}
			return a.printer().object(body, clusterColumns)
		},
	}
	wf.add(cmd, "it is gone")
	return cmd
}

func (a *app) clustersImport() *cobra.Command {
	return &cobra.Command{
		Use:   "import ID",
		Short: "Print the manifests that import a cluster into its hub (YAML, for oc apply -f -)",
		Long: `Print the import manifests of a registration (GET /clusters/{id}/import): YAML
documents to apply on the cluster, e.g. fleetctl clusters import ID | oc apply -f -.
With -o json or -o yaml, the API's answer instead.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var manifests string
			_, body, err := a.do(cmd.Context(), func(ctx context.Context) (*http.Response, []byte, error) {
				r, err := a.public.GetClusterImportWithResponse(ctx, args[0])
				if err != nil {
					return nil, nil, err
				}
				if r.JSON200 != nil {
					manifests = r.JSON200.Manifests
				}
				return r.HTTPResponse, r.Body, nil
			})
			if err != nil {
				return err
			}
			if a.output != formatTable {
				return a.printer().raw(body)
			}
			_, err = io.WriteString(a.stdout, manifests)
			return err
		},
	}
}

// optional returns nil for "", else a pointer to s.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
