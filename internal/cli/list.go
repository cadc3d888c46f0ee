package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/spf13/cobra"
)

// listFlags are the flags of every list command, passed to the API as its
// page, size, search and orderBy parameters.
type listFlags struct {
	search, orderBy string
	page, size      int
	all             bool
}

// add registers the flags on cmd; searchable says whether the list takes
// search and orderBy.
func (lf *listFlags) add(cmd *cobra.Command, searchable bool) {
	if searchable {
		cmd.Flags().StringVar(&lf.search, "search", "", "a filter in the API's search language, e.g. \"name like 'prod-%' and labels.env = 'prod'\"")
		cmd.Flags().StringVar(&lf.orderBy, "order-by", "", "fields to order by, e.g. \"name asc, created_at desc\"")
	}
	cmd.Flags().IntVar(&lf.page, "page", 0, "the page to show, from 1 (default: the first)")
	cmd.Flags().IntVar(&lf.size, "size", 0, "items per page (default: the server's)")
	cmd.Flags().BoolVar(&lf.all, "all-pages", false, "fetch every page")
	cmd.MarkFlagsMutuallyExclusive("page", "all-pages")
}

// params returns the optional parameters of lf for page.
func (lf *listFlags) params(page int) (pagePtr, size *int, search, orderBy *string) {
	if page > 0 {
		pagePtr = &page
	}
	if lf.size > 0 {
		size = &lf.size
	}
	if lf.search != "" {
		search = &lf.search
	}
	if lf.orderBy != "" {
		orderBy = &lf.orderBy
	}
	return pagePtr, size, search, orderBy
}

// pageCall fetches one page of a list.
type pageCall func(ctx context.Context, page int) (*http.Response, []byte, error)

// listPage is the part of an OCM list the CLI reads.
type listPage struct {
	Kind  string            `json:"kind"`
	Page  int               `json:"page"`
	Size  int               `json:"size"`
	Total int               `json:"total"`
	Items []json.RawMessage `json:"items"`
}

// list prints one page (or, with --all-pages, every page) of a list.
func (a *app) list(ctx context.Context, lf *listFlags, cols []column, fetch pageCall) error {
	if !lf.all {
		_, body, err := a.do(ctx, func(ctx context.Context) (*http.Response, []byte, error) { return fetch(ctx, lf.page) })
		if err != nil {
			return err
		}
		var lp listPage
		if a.output != formatTable || json.Unmarshal(body, &lp) != nil {
			return a.printer().raw(body)
		}
		if err := a.printItems(lp.Items, cols); err != nil {
			return err
		}
		if shown := (max(lp.Page, 1)-1)*lp.Size + len(lp.Items); shown < lp.Total {
			fmt.Fprintf(a.stderr, "%d of %d shown: --page %d for the next page, --all-pages for all\n", shown, lp.Total, max(lp.Page, 1)+1)
		}
		return nil
	}
	var all listPage
	for page := 1; ; page++ {
		_, body, err := a.do(ctx, func(ctx context.Context) (*http.Response, []byte, error) { return fetch(ctx, page) })
		if err != nil {
			return err
		}
		var lp listPage
		if err := json.Unmarshal(body, &lp); err != nil {
			return fmt.Errorf("reading page %d: %w", page, err)
		}
		all.Kind, all.Total = lp.Kind, lp.Total
		all.Items = append(all.Items, lp.Items...)
		if len(lp.Items) == 0 || len(all.Items) >= lp.Total {
			break
		}
	}
	if all.Items == nil {
		all.Items = []json.RawMessage{}
	}
	all.Page, all.Size = 1, len(all.Items)
	if a.output == formatTable {
		return a.printItems(all.Items, cols)
	}
	body, err := json.Marshal(all)
	if err != nil {
		return err
	}
	return a.printer().raw(body)
}

// printItems prints a list's items as a table.
func (a *app) printItems(items []json.RawMessage, cols []column) error {
	objs := make([]map[string]any, 0, len(items))
	for _, it := range items {
		var obj map[string]any
		if err := decode(it, &obj); err != nil {
			return fmt.Errorf("reading an item: %w", err)
		}
		objs = append(objs, obj)
	}
	return a.printer().table(objs, cols)
}
