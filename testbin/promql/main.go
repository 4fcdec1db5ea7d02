// Command promql-check parses the PromQL in slicectl's monitoring
// component with Prometheus' own code and names the metrics each
// expression reads (see README.md).
//
//	promql-check FILE...
//
// A FILE ending in .json is a Grafana dashboard: every target's `expr`,
// in panels and in rows' panels. Any other FILE is a PrometheusRule
// (monitoring.coreos.com/v1): its spec is a Prometheus rule file, checked
// by rulefmt.Parse as `promtool check rules` checks one (groups, names,
// durations, labels, annotation templates, and every expr).
//
// It prints one JSON line per expression, {"file", "where", "expr",
// "metrics"}, and {"file", "error"} lines for what does not parse; the
// exit status is 1 when anything failed.
package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// The parser as Prometheus runs it by default (no experimental functions).
var promql = parser.NewParser(parser.Options{})

type line struct {
	File    string   `json:"file"`
	Where   string   `json:"where,omitempty"`
	Expr    string   `json:"expr,omitempty"`
	Metrics []string `json:"metrics,omitempty"`
	Error   string   `json:"error,omitempty"`
}

var failed bool

func emit(l line) {
	if l.Error != "" {
		failed = true
	}
	b, err := json.Marshal(l)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(string(b))
}

// metrics names every metric an expression selects, by name or by a
// __name__ equality matcher.
func metrics(expr string) ([]string, error) {
	e, err := promql.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		if name != "" {
			seen[name] = true
		}
		return nil
	})
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

func check(file, where, expr string) {
	ms, err := metrics(expr)
	if err != nil {
		emit(line{File: file, Where: where, Expr: expr, Error: err.Error()})
		return
	}
	if len(ms) == 0 {
		emit(line{File: file, Where: where, Expr: expr, Error: "the expression names no metric"})
		return
	}
	emit(line{File: file, Where: where, Expr: expr, Metrics: ms})
}

func rules(file string, data []byte) {
	var obj struct {
		APIVersion string    `yaml:"apiVersion"`
		Kind       string    `yaml:"kind"`
		Spec       yaml.Node `yaml:"spec"`
	}
	if err := yaml.Unmarshal(data, &obj); err != nil {
		emit(line{File: file, Error: err.Error()})
		return
	}
	if obj.Kind != "PrometheusRule" || obj.APIVersion != "monitoring.coreos.com/v1" {
		emit(line{File: file, Error: fmt.Sprintf("want a monitoring.coreos.com/v1 PrometheusRule, got %s %s", obj.APIVersion, obj.Kind)})
		return
	}
	spec, err := yaml.Marshal(&obj.Spec)
	if err != nil {
		emit(line{File: file, Error: err.Error()})
		return
	}
	groups, errs := rulefmt.Parse(spec, false, model.UTF8Validation, promql, slog.New(slog.DiscardHandler))
	for _, e := range errs {
		emit(line{File: file, Error: e.Error()})
	}
	if groups == nil {
		return
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			name := r.Alert
			if name == "" {
				name = r.Record
			}
			check(file, g.Name+"/"+name, r.Expr)
		}
	}
}

type panel struct {
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

func dashboard(file string, data []byte) {
	var d struct {
		Title  string  `json:"title"`
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		emit(line{File: file, Error: err.Error()})
		return
	}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, t := range p.Targets {
				// Grafana's interval variables are not PromQL; give them the
				// value Grafana would (at least four scrape intervals).
				expr := strings.NewReplacer("$__rate_interval", "2m", "$__interval", "1m").Replace(t.Expr)
				check(file, p.Title+"/"+t.RefID, expr)
			}
		}
	}
	walk(d.Panels)
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: promql-check FILE...")
		os.Exit(2)
	}
	for _, f := range os.Args[1:] {
		data, err := os.ReadFile(f)
		if err != nil {
			emit(line{File: f, Error: err.Error()})
			continue
		}
		if strings.HasSuffix(f, ".json") {
			dashboard(f, data)
		} else {
			rules(f, data)
		}
	}
	if failed {
		os.Exit(1)
	}
}
