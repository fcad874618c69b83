// kvplugin is a go-plugin plugin serving go-plugin's examples/grpc KV contract over gRPC.
// Each value is stored in the file kv_<key> in the working directory; Get of a missing key
// fails with gRPC status NotFound.
package main

import (
	"context"
	"fmt"
	"io/ioutil"
	"os"
	"strconv"
	"strings"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"tether.test/interop/proto"
	"tether.test/interop/shared"
)

type kvStore struct{}

func fileFor(key string) (string, error) {
	if key == "" || strings.ContainsAny(key, "/\\\x00") || key == "." || key == ".." {
		return "", status.Errorf(codes.InvalidArgument, "invalid key %q", key)
	}
	return "kv_" + key, nil
}

func (kvStore) Get(_ context.Context, req *proto.GetRequest) (*proto.GetResponse, error) {
	name, err := fileFor(req.Key)
	if err != nil {
		return nil, err
	}
	value, err := ioutil.ReadFile(name)
	if os.IsNotExist(err) {
		return nil, status.Errorf(codes.NotFound, "key %q not found", req.Key)
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "read %s: %v", name, err)
	}
	return &proto.GetResponse{Value: value}, nil
}

func (kvStore) Put(_ context.Context, req *proto.PutRequest) (*proto.Empty, error) {
	name, err := fileFor(req.Key)
	if err != nil {
		return nil, err
	}
	if err := ioutil.WriteFile(name, req.Value, 0o644); err != nil {
		return nil, status.Errorf(codes.Internal, "write %s: %v", name, err)
	}
	return &proto.Empty{}, nil
}

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-h" || os.Args[1] == "--help") {
		fmt.Fprintln(os.Stderr, "kvplugin: a go-plugin KV plugin; run it through a go-plugin host (cookie BASIC_PLUGIN=hello)")
		os.Exit(2)
	}
	// `--app-version N` serves app protocol version N instead (a Terraform provider or a Vault
	// plugin speaks 5): go-plugin then answers N whatever the host offers.
	handshake := shared.Handshake
	if len(os.Args) > 2 && os.Args[1] == "--app-version" {
		version, err := strconv.Atoi(os.Args[2])
		if err != nil || version < 1 {
			fmt.Fprintf(os.Stderr, "kvplugin: --app-version %q is not a positive number\n", os.Args[2])
			os.Exit(2)
		}
		handshake.ProtocolVersion = uint(version)
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: handshake,
		Plugins:         shared.PluginMap(kvStore{}),
		GRPCServer:      plugin.DefaultGRPCServer,
	})
}
