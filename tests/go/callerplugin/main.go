// callerplugin is a go-plugin plugin (unmodified go-plugin) that calls another plugin of its
// tether catalog host through the host (docs/PROTOCOL.md §10.3), for tests/tests/plugin_calls.rs.
// It serves the KV contract: Get "PLUGIN:KEY" dials the host services (broker id 4294967295),
// asks tether.plugins.v1.Plugins/Open for PLUGIN, dials the broker id it returns and answers
// what PLUGIN's proto.KV/Get KEY answers; the host's refusal comes back with its status as is.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pluginsproto "tether.test/interop/pluginsproto"
	"tether.test/interop/proto"
	"tether.test/interop/shared"
)

// hostServicesID is the broker id a tether host serves its host services under.
const hostServicesID = 4294967295

type caller struct {
	broker *plugin.GRPCBroker
}

func (c caller) Get(ctx context.Context, req *proto.GetRequest) (*proto.GetResponse, error) {
	parts := strings.SplitN(req.Key, ":", 2)
	if len(parts) != 2 {
		return nil, status.Error(codes.InvalidArgument, "expected PLUGIN:KEY")
	}
	host, err := c.broker.Dial(hostServicesID)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "dialling the host services: %v", err)
	}
	defer host.Close()
	opened, err := pluginsproto.NewPluginsClient(host).Open(ctx, &pluginsproto.OpenRequest{Plugin: parts[0]})
	if err != nil {
		return nil, err
	}
	conn, err := c.broker.Dial(opened.BrokerId)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "dialling broker id %d: %v", opened.BrokerId, err)
	}
	defer conn.Close()
	return proto.NewKVClient(conn).Get(ctx, &proto.GetRequest{Key: parts[1]})
}

func (caller) Put(context.Context, *proto.PutRequest) (*proto.Empty, error) {
	return nil, status.Error(codes.Unimplemented, "the caller plugin stores nothing")
}

// callerPlugin registers the KV service with the plugin's broker at hand.
type callerPlugin struct {
	plugin.Plugin
}

func (callerPlugin) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	proto.RegisterKVServer(s, caller{broker: broker})
	return nil
}

func (callerPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (interface{}, error) {
	return nil, fmt.Errorf("callerplugin has no host side")
}

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "callerplugin: a go-plugin KV plugin calling other plugins through a tether host (cookie BASIC_PLUGIN=hello)")
		os.Exit(2)
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: shared.Handshake,
		Plugins:         map[string]plugin.Plugin{"kv": callerPlugin{}},
		GRPCServer:      plugin.DefaultGRPCServer,
	})
}
