package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"
)

// The output formats of -o.
const (
	formatTable = "table"
	formatJSON  = "json"
	formatYAML  = "yaml"
)

// column is one column of a table: its header and how to read its cell from
// an object of the API's JSON.
type column struct {
	header string
	value  func(obj map[string]any) string
}

// field is the column of the value at a dotted path, e.g. "hub.name".
func field(header, path string) column {
	return column{header: header, value: func(obj map[string]any) string { return cell(lookup(obj, path)) }}
}

// lookup returns the value at a dotted path of obj, or nil.
func lookup(obj map[string]any, path string) any {
	var v any = obj
	for key := range strings.SplitSeq(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[key]
	}
	return v
}

// cell renders a JSON value for a table: maps as k=v,k=v in key order,
// times in UTC to the second, nothing for null.
func cell(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t.UTC().Format(time.RFC3339)
		}
		return v
	case json.Number:
		return v.String()
	case bool:
		return fmt.Sprint(v)
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + cell(v[k])
		}
		return strings.Join(parts, ",")
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = cell(e)
		}
		return strings.Join(parts, ",")
	default:
		return fmt.Sprint(v)
	}
}

// conditionsColumn summarises a conditions array: each condition's type,
// with its reason when it is not True (Delivered=False:PublishedToAgent).
func conditionsColumn() column {
	return column{header: "CONDITIONS", value: func(obj map[string]any) string {
		conds, _ := obj["conditions"].([]any)
		parts := make([]string, 0, len(conds))
		for _, c := range conds {
			m, ok := c.(map[string]any)
			if !ok {
				continue
			}
			s := cell(m["type"]) + "=" + cell(m["status"])
			if cell(m["status"]) != "True" && cell(m["reason"]) != "" {
				s += ":" + cell(m["reason"])
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, " ")
	}}
}

// decode reads JSON keeping numbers as written (ids and revisions stay exact).
func decode(body []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	return d.Decode(v)
}

// printer writes the API's answers in the format of -o.
type printer struct {
	w      io.Writer
	format string
}

// validFormat checks the value of -o.
func validFormat(f string) error {
	switch f {
	case formatTable, formatJSON, formatYAML:
		return nil
	}
	return &exitError{code: ExitLocal, msg: "-o must be table, json or yaml"}
}

// raw prints a JSON body as JSON (indented) or YAML; a table format prints
// JSON too, for answers that have no table.
func (p printer) raw(body []byte) error {
	if p.format == formatYAML {
		y, err := yaml.JSONToYAML(body)
		if err != nil {
			return fmt.Errorf("converting the answer to YAML: %w", err)
		}
		_, err = p.w.Write(y)
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, bytes.TrimSpace(body), "", "  "); err != nil {
		// Not JSON: print it as it came.
		_, err = p.w.Write(body)
		return err
	}
	out.WriteByte('\n')
	_, err := p.w.Write(out.Bytes())
	return err
}

// object prints one object: a one-row table, or the body as it came.
func (p printer) object(body []byte, cols []column) error {
	if p.format != formatTable || cols == nil {
		return p.raw(body)
	}
	var obj map[string]any
	if err := decode(body, &obj); err != nil {
		return p.raw(body)
	}
	return p.table([]map[string]any{obj}, cols)
}

// table prints objects as a table with a header row.
func (p printer) table(objs []map[string]any, cols []column) error {
	return p.tableRows(objs, cols, true)
}

// rows prints objects as rows of a table whose header was printed before.
func (p printer) rows(objs []map[string]any, cols []column) error {
	return p.tableRows(objs, cols, false)
}

func (p printer) tableRows(objs []map[string]any, cols []column, header bool) error {
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	if header {
		headers := make([]string, len(cols))
		for i, c := range cols {
			headers[i] = c.header
		}
		fmt.Fprintln(tw, strings.Join(headers, "\t"))
	}
	for _, obj := range objs {
		cells := make([]string, len(cols))
		for i, c := range cols {
			cells[i] = strings.ReplaceAll(c.value(obj), "\t", " ")
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}
