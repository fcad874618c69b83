// Package counter holds what the counter interop host and plugin agree on (go-plugin's
// examples/bidirectional contract): the plugin set and the go-plugin glue for proto.Counter
// and the host's proto.AddHelper callback. It uses only API common to go-plugin v1.0.1 and
// v1.8.x.
package counter

import (
	"context"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	proto "tether.test/interop/counterproto"
)

// Handshake matches go-plugin's examples/bidirectional. (Not shared.Handshake: importing
// package shared would link the KV proto package, whose message names clash with these.)
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "BASIC_PLUGIN",
	MagicCookieValue: "hello",
}

// PluginName is the key of the counter plugin in the plugin set.
const PluginName = "counter"

// Counter is what the plugin implements; add is the host's adder.
type Counter interface {
	Put(key string, value int64, add func(a, b int64) (int64, error)) error
	Get(key string) (int64, error)
}

// GRPCPlugin implements plugin.GRPCPlugin. Impl is set on the plugin side only.
type GRPCPlugin struct {
	plugin.Plugin
	Impl Counter
}

// GRPCServer registers proto.Counter on the plugin's gRPC server.
func (p *GRPCPlugin) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	proto.RegisterCounterServer(s, &server{impl: p.Impl, broker: broker})
	return nil
}

// GRPCClient returns a *Client on the host side.
func (p *GRPCPlugin) GRPCClient(_ context.Context, broker *plugin.GRPCBroker, c *grpc.ClientConn) (interface{}, error) {
	return &Client{broker: broker, client: proto.NewCounterClient(c)}, nil
}

// PluginMap builds the plugin set; impl is nil on the host side.
func PluginMap(impl Counter) map[string]plugin.Plugin {
	return map[string]plugin.Plugin{PluginName: &GRPCPlugin{Impl: impl}}
}

// Client is the host's view of the plugin.
type Client struct {
	broker *plugin.GRPCBroker
	client proto.CounterClient
}

type adder struct{}

func (adder) Sum(_ context.Context, req *proto.SumRequest) (*proto.SumResponse, error) {
	return &proto.SumResponse{R: req.A + req.B}, nil
}

// Put serves AddHelper on a fresh broker id for this call, as go-plugin's example does.
func (c *Client) Put(key string, value int64) error {
	served := make(chan *grpc.Server, 1)
	id := c.broker.NextId()
	go c.broker.AcceptAndServe(id, func(opts []grpc.ServerOption) *grpc.Server {
		s := grpc.NewServer(opts...)
		proto.RegisterAddHelperServer(s, adder{})
		served <- s
		return s
	})
	_, err := c.client.Put(context.Background(), &proto.PutRequest{AddServer: id, Key: key, Value: value})
	(<-served).Stop()
	return err
}

// Get returns the number stored under key.
func (c *Client) Get(key string) (int64, error) {
	resp, err := c.client.Get(context.Background(), &proto.GetRequest{Key: key})
	if err != nil {
		return 0, err
	}
	return resp.Value, nil
}

type server struct {
	impl   Counter
	broker *plugin.GRPCBroker
}

func (s *server) Put(ctx context.Context, req *proto.PutRequest) (*proto.Empty, error) {
	conn, err := s.broker.Dial(req.AddServer)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	helper := proto.NewAddHelperClient(conn)
	add := func(a, b int64) (int64, error) {
		resp, err := helper.Sum(ctx, &proto.SumRequest{A: a, B: b})
		if err != nil {
			return 0, err
		}
		return resp.R, nil
	}
	return &proto.Empty{}, s.impl.Put(req.Key, req.Value, add)
}

func (s *server) Get(_ context.Context, req *proto.GetRequest) (*proto.GetResponse, error) {
	v, err := s.impl.Get(req.Key)
	if err != nil {
		return nil, err
	}
	return &proto.GetResponse{Value: v}, nil
}
