// kvhost is a go-plugin host for the KV contract of go-plugin's examples/grpc.
//
//	KV_PLUGIN="<command> [args]" kvhost [--plaintext] [--multiplex] put KEY VALUE
//	KV_PLUGIN="<command> [args]" kvhost [--plaintext] [--multiplex] get KEY
//	KV_PLUGIN="<command> [args]" kvhost [--plaintext] bench --calls N --launches L [--concurrency C]
//	KV_PLUGIN="<command> [args]" kvhost [--plaintext] [--multiplex] measure METRIC [options]   (see measure.go)
//
// AutoMTLS is on unless --plaintext is given. --multiplex sets GRPCBrokerMultiplex (go-plugin ≥ 1.6
// only; the v101 build refuses it): the plugin's connection is then a yamux session whose first
// stream carries the calls. Only the gRPC protocol is allowed. KV_PLUGIN is
// split on whitespace. Exit status: 0 ok, 1 error, 2 usage error, 3 Get of a missing key
// (gRPC NotFound). Host log level: KVHOST_LOG_LEVEL (trace|debug|info|warn|error, default warn).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/ioutil"
	"math"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"tether.test/interop/proto"
	"tether.test/interop/shared"
)

const usage = `usage:
  KV_PLUGIN="<command> [args]" kvhost [--plaintext] [--multiplex] put KEY VALUE
  KV_PLUGIN="<command> [args]" kvhost [--plaintext] [--multiplex] get KEY
  KV_PLUGIN="<command> [args]" kvhost [--plaintext] bench --calls N --launches L [--concurrency C]
  KV_PLUGIN="<command> [args]" kvhost [--plaintext] [--multiplex] measure launch|unary|rate|payload|plugin-rss|host-rss [options]
`

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
	err := run(os.Args[1:])
	if err == nil {
		return
	}
	fmt.Fprintf(os.Stderr, "kvhost: %v\n", err)
	var ue usageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	case grpcCode(err) == codes.NotFound:
		os.Exit(3)
	default:
		os.Exit(1)
	}
}

// grpcCode finds a gRPC status in err's wrap chain (grpc 1.33's status.Code does not unwrap).
func grpcCode(err error) codes.Code {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if s, ok := e.(interface{ GRPCStatus() *status.Status }); ok {
			return s.GRPCStatus().Code()
		}
	}
	return codes.Unknown
}

func run(args []string) error {
	global := flag.NewFlagSet("kvhost", flag.ContinueOnError)
	global.SetOutput(ioutil.Discard)
	plaintext := global.Bool("plaintext", false, "disable AutoMTLS")
	global.BoolVar(&multiplexBroker, "multiplex", false, "turn on gRPC broker multiplexing (go-plugin >= 1.6)")
	if err := global.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	rest := global.Args()
	if len(rest) == 0 {
		return usageError{"missing command"}
	}
	switch rest[0] {
	case "put":
		if len(rest) != 3 {
			return usageError{"put takes KEY VALUE"}
		}
		return withKV(*plaintext, func(kv proto.KVClient) error {
			if _, err := kv.Put(context.Background(), &proto.PutRequest{Key: rest[1], Value: []byte(rest[2])}); err != nil {
				return fmt.Errorf("put %q: %w", rest[1], err)
			}
			return nil
		})
	case "get":
		if len(rest) != 2 {
			return usageError{"get takes KEY"}
		}
		return withKV(*plaintext, func(kv proto.KVClient) error {
			resp, err := kv.Get(context.Background(), &proto.GetRequest{Key: rest[1]})
			if err != nil {
				return fmt.Errorf("get %q: %w", rest[1], err)
			}
			_, err = os.Stdout.Write(append(resp.Value, '\n'))
			return err
		})
	case "bench":
		return bench(*plaintext, rest[1:])
	case "measure":
		return measure(*plaintext, rest[1:])
	default:
		return usageError{fmt.Sprintf("unknown command %q", rest[0])}
	}
}

// multiplexBroker is the global --multiplex flag, read by every newClient.
var multiplexBroker bool

func newClient(plaintext bool) (*plugin.Client, error) {
	fields := strings.Fields(os.Getenv("KV_PLUGIN"))
	if len(fields) == 0 {
		return nil, errors.New("KV_PLUGIN is not set (it must hold the plugin command, e.g. KV_PLUGIN=./kvplugin)")
	}
	level := hclog.Warn
	if s := os.Getenv("KVHOST_LOG_LEVEL"); s != "" {
		level = hclog.LevelFromString(s)
	}
	config := &plugin.ClientConfig{
		HandshakeConfig:  shared.Handshake,
		Plugins:          shared.PluginMap(nil),
		Cmd:              exec.Command(fields[0], fields[1:]...),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         !plaintext,
		Logger: hclog.New(&hclog.LoggerOptions{
			Name:   "kvhost",
			Output: os.Stderr,
			Level:  level,
		}),
	}
	if err := setMultiplex(config, multiplexBroker); err != nil {
		return nil, err
	}
	return plugin.NewClient(config), nil
}

func dispense(client *plugin.Client) (proto.KVClient, error) {
	rpcClient, err := client.Client()
	if err != nil {
		return nil, fmt.Errorf("starting plugin %q: %w", os.Getenv("KV_PLUGIN"), err)
	}
	raw, err := rpcClient.Dispense(shared.PluginName)
	if err != nil {
		return nil, fmt.Errorf("dispense %q: %w", shared.PluginName, err)
	}
	kv, ok := raw.(proto.KVClient)
	if !ok {
		return nil, fmt.Errorf("dispense %q: unexpected type %T", shared.PluginName, raw)
	}
	return kv, nil
}

// withKV launches the plugin, runs f and always kills the plugin afterwards.
func withKV(plaintext bool, f func(proto.KVClient) error) error {
	client, err := newClient(plaintext)
	if err != nil {
		return err
	}
	defer client.Kill()
	kv, err := dispense(client)
	if err != nil {
		return err
	}
	return f(kv)
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

func sortDurations(d []time.Duration) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
}

func bench(plaintext bool, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(ioutil.Discard)
	calls := fs.Int("calls", 0, "number of Get calls")
	launches := fs.Int("launches", 0, "number of plugin launches for startup timing")
	concurrency := fs.Int("concurrency", 1, "goroutines for the throughput run")
	fs.BoolVar(&plaintext, "plaintext", plaintext, "disable AutoMTLS")
	if err := fs.Parse(args); err != nil {
		return usageError{"bench: " + err.Error()}
	}
	if fs.NArg() != 0 || *calls < 1 || *launches < 1 || *concurrency < 1 {
		return usageError{"bench needs --calls N>=1 --launches L>=1 [--concurrency C>=1]"}
	}
	ctx := context.Background()
	value := []byte(strings.Repeat("0123456789abcdef", 4)) // 64 bytes

	// Startup: spawn -> first call completed, over L launches.
	startups := make([]time.Duration, 0, *launches)
	for i := 0; i < *launches; i++ {
		t0 := time.Now()
		client, err := newClient(plaintext)
		if err != nil {
			return err
		}
		kv, err := dispense(client)
		if err == nil {
			_, err = kv.Put(ctx, &proto.PutRequest{Key: "bench", Value: value})
		}
		elapsed := time.Since(t0)
		client.Kill()
		if err != nil {
			return fmt.Errorf("bench launch %d: %w", i+1, err)
		}
		startups = append(startups, elapsed)
	}
	sortDurations(startups)

	var (
		latencies []time.Duration
		perSec    float64
	)
	err := withKV(plaintext, func(kv proto.KVClient) error {
		if _, err := kv.Put(ctx, &proto.PutRequest{Key: "bench", Value: value}); err != nil {
			return fmt.Errorf("bench put: %w", err)
		}
		// Sequential latency.
		latencies = make([]time.Duration, 0, *calls)
		for i := 0; i < *calls; i++ {
			t0 := time.Now()
			resp, err := kv.Get(ctx, &proto.GetRequest{Key: "bench"})
			latencies = append(latencies, time.Since(t0))
			if err != nil {
				return fmt.Errorf("bench get: %w", err)
			}
			if len(resp.Value) != len(value) {
				return fmt.Errorf("bench get: got %d bytes, want %d", len(resp.Value), len(value))
			}
		}
		sortDurations(latencies)

		// Throughput: N calls spread over C goroutines.
		var (
			next     int64
			wg       sync.WaitGroup
			errOnce  sync.Once
			firstErr error
		)
		t0 := time.Now()
		for g := 0; g < *concurrency; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for atomic.AddInt64(&next, 1) <= int64(*calls) {
					if _, err := kv.Get(ctx, &proto.GetRequest{Key: "bench"}); err != nil {
						errOnce.Do(func() { firstErr = err })
						return
					}
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(t0)
		if firstErr != nil {
			return fmt.Errorf("bench concurrent get: %w", firstErr)
		}
		perSec = float64(*calls) / elapsed.Seconds()
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("startup_ms_p50=%.2f call_us_p50=%.1f call_us_p99=%.1f calls_per_s=%.1f\n",
		float64(percentile(startups, 0.5).Microseconds())/1000,
		float64(percentile(latencies, 0.5).Nanoseconds())/1000,
		float64(percentile(latencies, 0.99).Nanoseconds())/1000,
		perSec)
	return nil
}
