// Package shared holds what the KV interop host and plugin agree on: the handshake, the plugin
// set and the go-plugin glue for the generated proto.KV service. It uses only the go-plugin API
// that is common to v1.0.1 (Debian) and v1.8.x, so the same source builds against both.
package shared

import (
	"context"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"tether.test/interop/proto"
)

// Handshake matches go-plugin's examples/grpc.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "BASIC_PLUGIN",
	MagicCookieValue: "hello",
}

// PluginName is the key of the KV plugin in the plugin set.
const PluginName = "kv"

// KVGRPCPlugin implements plugin.GRPCPlugin. Impl is set on the plugin side only.
type KVGRPCPlugin struct {
	// Embedding the interface (left nil) satisfies plugin.Plugin's net/rpc methods, which are
	// never called because only gRPC is offered/allowed.
	plugin.Plugin
	Impl proto.KVServer
}

// GRPCServer registers the KV service on the plugin's gRPC server.
func (p *KVGRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	proto.RegisterKVServer(s, p.Impl)
	return nil
}

// GRPCClient returns a proto.KVClient on the host side.
func (p *KVGRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (interface{}, error) {
	return proto.NewKVClient(c), nil
}

// PluginMap builds the plugin set; impl is nil on the host side.
func PluginMap(impl proto.KVServer) map[string]plugin.Plugin {
	return map[string]plugin.Plugin{PluginName: &KVGRPCPlugin{Impl: impl}}
}
