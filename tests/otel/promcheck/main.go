// promcheck checks a Prometheus text exposition (stdin) with the Prometheus project's own code
// and prints what a Prometheus server would take from it, for tests to compare with the calls
// they made:
//
//  1. lint: promlint, the package (and version) `promtool check metrics` runs — problems go to
//     stderr as promtool prints them ("<metric> <problem>") and make the exit status 3, as
//     promtool's does;
//  2. scrape: the parser Prometheus's scrape loop uses (model/textparse, content type
//     text/plain; version=0.0.4) — every sample becomes one JSON object on stdout:
//     {"name": …, "labels": {…}, "value": "<float, Go 'g' format: 1, 0.5, +Inf>"}, and each
//     # TYPE line one {"type": "<counter|gauge|histogram|…>", "family": …}.
//
// Exit status: 0 clean, 1 the input does not parse (the error on stderr), 2 usage, 3 lint
// problems (the samples are still printed).
//
// Why not promtool itself: `check metrics` is exactly step 1, but building promtool compiles
// Prometheus's TSDB, PromQL and (without -tags remove_all_sd) every cloud SDK of its service
// discovery — 450 to 1,000 CPU-seconds on this kind of machine, against seconds for this — and
// it prints no values, which the tests need.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
)

type sample struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
	Value  string            `json:"value"`
}

type family struct {
	Type   string `json:"type"`
	Family string `json:"family"`
}

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: promcheck < exposition.txt  (lints like `promtool check metrics`, prints the samples as JSON lines)")
		os.Exit(2)
	}
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "promcheck: reading stdin:", err)
		os.Exit(1)
	}

	problems, err := promlint.New(bytes.NewReader(input)).Lint()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error while linting:", err)
		os.Exit(1)
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p.Metric, p.Text)
	}

	out := json.NewEncoder(os.Stdout)
	parser, err := textparse.New(input, "text/plain; version=0.0.4", nil, textparse.ParserOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "promcheck: making the scrape parser:", err)
		os.Exit(1)
	}
	var lset labels.Labels
	for {
		entry, err := parser.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "promcheck: the scrape parser refused the input:", err)
			os.Exit(1)
		}
		switch entry {
		case textparse.EntryType:
			name, typ := parser.Type()
			_ = out.Encode(family{Type: string(typ), Family: string(name)})
		case textparse.EntrySeries:
			_, _, value := parser.Series()
			parser.Labels(&lset)
			s := sample{Name: lset.Get(labels.MetricName), Labels: map[string]string{}, Value: strconv.FormatFloat(value, 'g', -1, 64)}
			lset.Range(func(l labels.Label) {
				if l.Name != labels.MetricName {
					s.Labels[l.Name] = l.Value
				}
			})
			_ = out.Encode(s)
		}
	}
	if len(problems) > 0 {
		os.Exit(3)
	}
}
