package main

// measure prints raw measurements for tether's benchmark harness (bench/, `tether-bench`): the
// same metrics, arguments, call sequence and output keys as `kv-host measure`
// (examples/src/bin/kv-host/measure.rs), so the harness compares like with like and computes
// every statistic of both systems with the same code. One line of space-separated key=value
// pairs; sample lists are comma-separated nanoseconds.
//
//	measure launch --count L                 samples_ns=…   spawn -> first 64-byte Put done
//	measure unary --calls N [--warmup W] [--size B]   samples_ns=…   sequential Gets of a B-byte value (default 64)
//	measure rate --calls N --concurrency C [--warmup W]   calls=N elapsed_ns=…   (the warm-up over the same C callers)
//	measure payload --size B --rounds K      bytes=… elapsed_ns=…  or  failed=CODE
//	measure plugin-rss                       rss_kb=…       plugin VmRSS after one Put + Get
//	measure host-rss --plugins P             first_kb=… last_kb=… plugins=P

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io/ioutil"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	plugin "github.com/hashicorp/go-plugin"

	"tether.test/interop/proto"
)

// defaultWarmupCalls matches kv-host's DEFAULT_WARMUP_CALLS.
const defaultWarmupCalls = 100

// unaryKey is the key the unary metric writes and reads.
const unaryKey = "bench_unary"

// unaryMaxSize is the largest unary --size (larger values are payload's), as in kv-bench.
const unaryMaxSize = 1 << 20

// payloadKey is the key the payload metric writes and reads.
const payloadKey = "bench_payload"

var benchValue = []byte(strings.Repeat("0123456789abcdef", 4)) // 64 bytes

// metricFlags lists the flags each metric takes (and requires, except warmup).
var metricFlags = map[string][]string{
	"launch":     {"count"},
	"unary":      {"calls", "warmup", "size"},
	"rate":       {"calls", "concurrency", "warmup"},
	"payload":    {"size", "rounds"},
	"plugin-rss": {},
	"host-rss":   {"plugins"},
}

func measure(plaintext bool, args []string) error {
	if len(args) == 0 {
		return usageError{"measure needs a metric: launch|unary|rate|payload|plugin-rss|host-rss"}
	}
	metric := args[0]
	allowed, ok := metricFlags[metric]
	if !ok {
		return usageError{fmt.Sprintf("measure: unknown metric %q", metric)}
	}
	fs := flag.NewFlagSet("measure "+metric, flag.ContinueOnError)
	fs.SetOutput(ioutil.Discard)
	values := map[string]*int{}
	for _, name := range allowed {
		def := 0
		if name == "warmup" {
			def = defaultWarmupCalls
		}
		if name == "size" && metric == "unary" {
			def = len(benchValue)
		}
		values[name] = fs.Int(name, def, name)
	}
	if err := fs.Parse(args[1:]); err != nil {
		return usageError{"measure " + metric + ": " + err.Error()}
	}
	if fs.NArg() != 0 {
		return usageError{fmt.Sprintf("measure %s: unexpected argument %q", metric, fs.Arg(0))}
	}
	for name, v := range values {
		min := 1
		if name == "warmup" {
			min = 0
		}
		if name == "plugins" {
			min = 2
		}
		if *v < min {
			return usageError{fmt.Sprintf("measure %s needs --%s >= %d", metric, name, min)}
		}
		if name == "size" && metric == "unary" && *v > unaryMaxSize {
			return usageError{fmt.Sprintf("measure unary needs --size <= %d", unaryMaxSize)}
		}
	}
	get := func(name string) int { return *values[name] }

	var (
		line string
		err  error
	)
	switch metric {
	case "launch":
		line, err = measureLaunch(plaintext, get("count"))
	case "unary":
		line, err = measureUnary(plaintext, get("calls"), get("warmup"), get("size"))
	case "rate":
		line, err = measureRate(plaintext, get("calls"), get("concurrency"), get("warmup"))
	case "payload":
		line, err = measurePayload(plaintext, get("size"), get("rounds"))
	case "plugin-rss":
		line, err = measurePluginRSS(plaintext)
	case "host-rss":
		line, err = measureHostRSS(plaintext, get("plugins"))
	}
	if err != nil {
		return fmt.Errorf("measure %s: %w", metric, err)
	}
	fmt.Println(line)
	return nil
}

func putSmall(kv proto.KVClient) error {
	if _, err := kv.Put(context.Background(), &proto.PutRequest{Key: "bench", Value: benchValue}); err != nil {
		return fmt.Errorf("put failed: %w", err)
	}
	return nil
}

func getSmall(kv proto.KVClient) error {
	return getSized(kv, "bench", len(benchValue))
}

// getSized Gets key and checks that its value has size bytes.
func getSized(kv proto.KVClient, key string, size int) error {
	resp, err := kv.Get(context.Background(), &proto.GetRequest{Key: key})
	if err != nil {
		return fmt.Errorf("get failed: %w", err)
	}
	if len(resp.Value) != size {
		return fmt.Errorf("get: got %d bytes, want %d", len(resp.Value), size)
	}
	return nil
}

func joinNs(samples []time.Duration) string {
	parts := make([]string, len(samples))
	for i, s := range samples {
		parts[i] = strconv.FormatInt(s.Nanoseconds(), 10)
	}
	return strings.Join(parts, ",")
}

func measureLaunch(plaintext bool, count int) (string, error) {
	samples := make([]time.Duration, 0, count)
	for i := 0; i < count; i++ {
		t0 := time.Now()
		client, err := newClient(plaintext)
		if err != nil {
			return "", err
		}
		kv, err := dispense(client)
		if err == nil {
			err = putSmall(kv)
		}
		elapsed := time.Since(t0)
		client.Kill()
		if err != nil {
			return "", err
		}
		samples = append(samples, elapsed)
	}
	return "samples_ns=" + joinNs(samples), nil
}

func measureUnary(plaintext bool, calls, warmup, size int) (string, error) {
	var line string
	err := withKV(plaintext, func(kv proto.KVClient) error {
		if _, err := kv.Put(context.Background(), &proto.PutRequest{Key: unaryKey, Value: bytes.Repeat([]byte{0x5a}, size)}); err != nil {
			return fmt.Errorf("put failed: %w", err)
		}
		for i := 0; i < warmup; i++ {
			if err := getSized(kv, unaryKey, size); err != nil {
				return err
			}
		}
		samples := make([]time.Duration, 0, calls)
		for i := 0; i < calls; i++ {
			t0 := time.Now()
			if err := getSized(kv, unaryKey, size); err != nil {
				return err
			}
			samples = append(samples, time.Since(t0))
		}
		line = "samples_ns=" + joinNs(samples)
		return nil
	})
	return line, err
}

func measureRate(plaintext bool, calls, concurrency, warmup int) (string, error) {
	var line string
	err := withKV(plaintext, func(kv proto.KVClient) error {
		if err := putSmall(kv); err != nil {
			return err
		}
		// The warm-up runs over the same concurrent callers as the timed calls.
		if err := concurrentGets(kv, warmup, concurrency); err != nil {
			return err
		}
		t0 := time.Now()
		if err := concurrentGets(kv, calls, concurrency); err != nil {
			return err
		}
		elapsed := time.Since(t0)
		line = fmt.Sprintf("calls=%d elapsed_ns=%d", calls, elapsed.Nanoseconds())
		return nil
	})
	return line, err
}

// concurrentGets: `calls` small Gets spread over `concurrency` goroutines that each take the
// next call number from a shared counter; the first error.
func concurrentGets(kv proto.KVClient, calls, concurrency int) error {
	var (
		next     int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for g := 0; g < concurrency; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for atomic.AddInt64(&next, 1) <= int64(calls) {
				if err := getSmall(kv); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// measurePayload: one untimed round, then `rounds` timed Put+Get rounds of `size` bytes; the
// value a Get returns is the next Put's request (no copy by the host).
func measurePayload(plaintext bool, size, rounds int) (string, error) {
	var line string
	err := withKV(plaintext, func(kv proto.KVClient) error {
		ctx := context.Background()
		value := bytes.Repeat([]byte{0x5a}, size)
		t0 := time.Now()
		for round := 0; round <= rounds; round++ {
			if round == 1 {
				t0 = time.Now()
			}
			_, err := kv.Put(ctx, &proto.PutRequest{Key: payloadKey, Value: value})
			var resp *proto.GetResponse
			if err == nil {
				resp, err = kv.Get(ctx, &proto.GetRequest{Key: payloadKey})
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "kvhost: measure payload: %d-byte round trip failed: %v\n", size, err)
				line = "failed=" + grpcCode(err).String()
				return nil
			}
			value = resp.Value
			if len(value) != size {
				return fmt.Errorf("get: got %d bytes, want %d", len(value), size)
			}
		}
		line = fmt.Sprintf("bytes=%d elapsed_ns=%d", 2*int64(size)*int64(rounds), time.Since(t0).Nanoseconds())
		return nil
	})
	return line, err
}

func measurePluginRSS(plaintext bool) (string, error) {
	client, err := newClient(plaintext)
	if err != nil {
		return "", err
	}
	defer client.Kill()
	kv, err := dispense(client)
	if err != nil {
		return "", err
	}
	if err := putSmall(kv); err != nil {
		return "", err
	}
	if err := getSmall(kv); err != nil {
		return "", err
	}
	reattach := client.ReattachConfig()
	if reattach == nil {
		return "", fmt.Errorf("the plugin's pid is unknown")
	}
	rss, err := vmRSSKB(fmt.Sprintf("/proc/%d/status", reattach.Pid))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("rss_kb=%d", rss), nil
}

func measureHostRSS(plaintext bool, plugins int) (string, error) {
	var (
		live  []*plugin.Client
		first int64 = -1
		err   error
	)
	for i := 0; i < plugins; i++ {
		var client *plugin.Client
		client, err = newClient(plaintext)
		if err != nil {
			break
		}
		live = append(live, client)
		var kv proto.KVClient
		if kv, err = dispense(client); err != nil {
			break
		}
		if err = putSmall(kv); err != nil {
			break
		}
		if first < 0 {
			if first, err = vmRSSKB("/proc/self/status"); err != nil {
				break
			}
		}
	}
	var last int64
	if err == nil {
		last, err = vmRSSKB("/proc/self/status")
	}
	var wg sync.WaitGroup
	for _, c := range live {
		wg.Add(1)
		go func(c *plugin.Client) { defer wg.Done(); c.Kill() }(c)
	}
	wg.Wait()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("first_kb=%d last_kb=%d plugins=%d", first, last, plugins), nil
}

// vmRSSKB reads the VmRSS field (kB) of a /proc/<pid>/status file.
func vmRSSKB(path string) (int64, error) {
	data, err := ioutil.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest := strings.TrimPrefix(line, "VmRSS:"); rest != line {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s has no VmRSS line", path)
}
