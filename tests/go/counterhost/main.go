// counterhost is a go-plugin host for go-plugin's examples/bidirectional counter contract.
//
//	COUNTER_PLUGIN="<command> [args]" counterhost [--plaintext] [--multiplex] put KEY N
//	COUNTER_PLUGIN="<command> [args]" counterhost [--plaintext] [--multiplex] get KEY
//	COUNTER_PLUGIN="<command> [args]" counterhost [--plaintext] [--multiplex] measure callback --calls N [--warmup W]
//
// put serves AddHelper on a fresh broker id for the call. AutoMTLS is on unless --plaintext.
// --multiplex sets GRPCBrokerMultiplex (go-plugin ≥ 1.6 only; the v101 build refuses it): the
// host then refuses plugins that do not accept multiplexing.
// COUNTER_PLUGIN is split on whitespace. The plugin's stdout (GRPCStdio on go-plugin ≥ 1.1) is
// written to stderr as lines prefixed "plugin stdout: "; its stderr goes through the host's
// hclog logger (COUNTERHOST_LOG_LEVEL, default warn). Exit status: 0 ok, 1 error, 2 usage.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/ioutil"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"

	hclog "github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"

	"tether.test/interop/counter"
)

const usage = `usage:
  COUNTER_PLUGIN="<command> [args]" counterhost [--plaintext] [--multiplex] put KEY N
  COUNTER_PLUGIN="<command> [args]" counterhost [--plaintext] [--multiplex] get KEY
  COUNTER_PLUGIN="<command> [args]" counterhost [--plaintext] [--multiplex] measure callback --calls N [--warmup W]
`

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
	err := run(os.Args[1:])
	if err == nil {
		return
	}
	fmt.Fprintf(os.Stderr, "counterhost: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	os.Exit(1)
}

// prefixLines writes each complete line it receives to stderr with a prefix, within the
// Write call: a line handed over before the host exits is printed (a goroutine draining an
// io.Pipe could still hold it when main returns).
func prefixLines(prefix string) *lineWriter {
	return &lineWriter{prefix: prefix}
}

type lineWriter struct {
	prefix string
	mu     sync.Mutex
	buf    []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		fmt.Fprintf(os.Stderr, "%s%s\n", w.prefix, w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

// Flush prints what is left of an unterminated last line (once the plugin has stopped).
func (w *lineWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		fmt.Fprintf(os.Stderr, "%s%s\n", w.prefix, w.buf)
		w.buf = nil
	}
}

func run(args []string) error {
	global := flag.NewFlagSet("counterhost", flag.ContinueOnError)
	global.SetOutput(ioutil.Discard)
	plaintext := global.Bool("plaintext", false, "disable AutoMTLS")
	multiplex := global.Bool("multiplex", false, "turn on gRPC broker multiplexing (go-plugin >= 1.6)")
	if err := global.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	rest := global.Args()
	if len(rest) == 0 {
		return usageError{"missing command"}
	}
	var op func(*counter.Client) error
	switch rest[0] {
	case "put":
		if len(rest) != 3 {
			return usageError{"put takes KEY N"}
		}
		n, err := strconv.ParseInt(rest[2], 10, 64)
		if err != nil {
			return usageError{fmt.Sprintf("N must be an integer: %v", err)}
		}
		op = func(c *counter.Client) error { return c.Put(rest[1], n) }
	case "get":
		if len(rest) != 2 {
			return usageError{"get takes KEY"}
		}
		op = func(c *counter.Client) error {
			v, err := c.Get(rest[1])
			if err != nil {
				return err
			}
			fmt.Println(v)
			return nil
		}
	case "measure":
		m, err := measureOp(rest[1:])
		if err != nil {
			return err
		}
		op = m
	default:
		return usageError{fmt.Sprintf("unknown command %q", rest[0])}
	}

	fields := strings.Fields(os.Getenv("COUNTER_PLUGIN"))
	if len(fields) == 0 {
		return errors.New("COUNTER_PLUGIN is not set (it must hold the plugin command)")
	}
	level := hclog.Warn
	if s := os.Getenv("COUNTERHOST_LOG_LEVEL"); s != "" {
		level = hclog.LevelFromString(s)
	}
	stdout := prefixLines("plugin stdout: ")
	defer stdout.Flush()
	config := &plugin.ClientConfig{
		HandshakeConfig:  counter.Handshake,
		Plugins:          counter.PluginMap(nil),
		Cmd:              exec.Command(fields[0], fields[1:]...),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         !*plaintext,
		SyncStdout:       stdout,
		Logger: hclog.New(&hclog.LoggerOptions{
			Name:   "counterhost",
			Output: os.Stderr,
			Level:  level,
		}),
	}
	if err := setMultiplex(config, *multiplex); err != nil {
		return err
	}
	client := plugin.NewClient(config)
	defer client.Kill()
	rpc, err := client.Client()
	if err != nil {
		return fmt.Errorf("starting the plugin: %w", err)
	}
	raw, err := rpc.Dispense(counter.PluginName)
	if err != nil {
		return fmt.Errorf("dispensing %q: %w", counter.PluginName, err)
	}
	c, ok := raw.(*counter.Client)
	if !ok {
		return fmt.Errorf("dispensed %T, not a counter client", raw)
	}
	return op(c)
}
