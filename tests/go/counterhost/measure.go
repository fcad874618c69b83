package main

// measure prints raw measurements for tether's benchmark harness (bench/, `tether-bench`): the
// same arguments, call sequence and output keys as `counter-host measure`
// (examples/src/bin/counter-host.rs), so the harness computes every statistic of both systems
// with the same code.
//
//	measure callback --calls N [--warmup W]   unary_ns=… callback_ns=…
//
// After W untimed pairs, N timed pairs of a plain Get and a Put whose AddHelper is served on a
// fresh broker id (host→plugin→host→plugin→host, as go-plugin's examples/bidirectional does),
// interleaved so both see the same load. Samples are comma-separated nanoseconds.

import (
	"flag"
	"fmt"
	"io/ioutil"
	"strconv"
	"strings"
	"time"

	"tether.test/interop/counter"
)

// defaultWarmupPairs matches counter-host's DEFAULT_WARMUP_PAIRS.
const defaultWarmupPairs = 20

// measureOp parses `measure callback …` and returns the operation that measures and prints.
func measureOp(args []string) (func(*counter.Client) error, error) {
	if len(args) == 0 || args[0] != "callback" {
		return nil, usageError{"measure needs a metric: callback"}
	}
	fs := flag.NewFlagSet("measure callback", flag.ContinueOnError)
	fs.SetOutput(ioutil.Discard)
	calls := fs.Uint64("calls", 0, "timed pairs")
	warmup := fs.Uint64("warmup", defaultWarmupPairs, "untimed pairs first")
	if err := fs.Parse(args[1:]); err != nil {
		return nil, usageError{err.Error()}
	}
	if *calls == 0 || fs.NArg() != 0 {
		return nil, usageError{"measure callback takes --calls N (N ≥ 1) and optionally --warmup W"}
	}
	return func(c *counter.Client) error {
		// Not "bench": the harness runs the KV measurements in the same directory, and the KV
		// plugins store kv_bench there too.
		const key = "callback_bench"
		knockRetries := 0
		unary := make([]time.Duration, 0, *calls)
		callback := make([]time.Duration, 0, *calls)
		for i := uint64(0); i < *warmup+*calls; i++ {
			t0 := time.Now()
			if _, err := c.Get(key); err != nil {
				return fmt.Errorf("get: %w", err)
			}
			t1 := time.Now()
			if err := putRetryingKnockRace(c, key, &knockRetries); err != nil {
				return fmt.Errorf("put with a callback: %w", err)
			}
			t2 := time.Now()
			if i >= *warmup {
				unary = append(unary, t1.Sub(t0))
				callback = append(callback, t2.Sub(t1))
			}
		}
		fmt.Printf("unary_ns=%s callback_ns=%s knock_retries=%d\n", joinNs(unary), joinNs(callback), knockRetries)
		return nil
	}, nil
}

// maxKnockRetries bounds putRetryingKnockRace.
const maxKnockRetries = 3

// putRetryingKnockRace is c.Put, retried when go-plugin's multiplexed broker lost the race
// between the host's `go AcceptAndServe(id)` (examples/bidirectional's pattern) and the
// plugin's knock for that id: the host answers the knock "no listener for id" instead of
// waiting for the listener (go-plugin v1.8.0). The timed sample includes the failed attempt,
// as a Go user retrying would pay it; retries are counted in knock_retries.
func putRetryingKnockRace(c *counter.Client, key string, retries *int) error {
	for attempt := 0; ; attempt++ {
		err := c.Put(key, 1)
		if err == nil || attempt == maxKnockRetries || !strings.Contains(err.Error(), "no listener for id") {
			return err
		}
		*retries++
	}
}

func joinNs(samples []time.Duration) string {
	parts := make([]string, len(samples))
	for i, d := range samples {
		parts[i] = strconv.FormatInt(d.Nanoseconds(), 10)
	}
	return strings.Join(parts, ",")
}
