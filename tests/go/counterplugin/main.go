// counterplugin is a go-plugin plugin serving go-plugin's examples/bidirectional counter
// contract. Put dials the host's AddHelper (broker id add_server) to add; each number is kept as
// {"Value":N} in kv_<key> in the working directory (0 for a key never put).
package main

import (
	"encoding/json"
	"fmt"
	"io/ioutil"
	"os"
	"strings"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"tether.test/interop/counter"
)

type data struct{ Value int64 }

type files struct{}

func fileFor(key string) (string, error) {
	if key == "" || strings.ContainsAny(key, "/\\\x00") || key == "." || key == ".." {
		return "", status.Errorf(codes.InvalidArgument, "invalid key %q", key)
	}
	return "kv_" + key, nil
}

func (files) Get(key string) (int64, error) {
	name, err := fileFor(key)
	if err != nil {
		return 0, err
	}
	raw, err := ioutil.ReadFile(name)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var d data
	if err := json.Unmarshal(raw, &d); err != nil {
		return 0, status.Errorf(codes.DataLoss, "%s: %v", name, err)
	}
	return d.Value, nil
}

func (f files) Put(key string, value int64, add func(a, b int64) (int64, error)) error {
	name, err := fileFor(key)
	if err != nil {
		return err
	}
	current, err := f.Get(key)
	if err != nil {
		return err
	}
	sum, err := add(current, value)
	if err != nil {
		return err
	}
	buf, err := json.Marshal(&data{sum})
	if err != nil {
		return err
	}
	return ioutil.WriteFile(name, buf, 0o644)
}

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-h" || os.Args[1] == "--help") {
		fmt.Fprintln(os.Stderr, "counterplugin: a go-plugin counter plugin; run it through a go-plugin host (cookie BASIC_PLUGIN=hello)")
		os.Exit(2)
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: counter.Handshake,
		Plugins:         counter.PluginMap(files{}),
		GRPCServer:      plugin.DefaultGRPCServer,
	})
}
