// otelplugin is a go-plugin plugin serving the KV contract with OpenTelemetry instrumentation the
// way go-plugin users add it by hand: otelgrpc's stats handler on the plugin's gRPC server (it
// continues the trace of the host's call from the W3C traceparent in the request metadata) and
// an OTLP/gRPC span exporter. The plugin has no network: the exporter speaks OTLP over the
// connection tether hosts serve their host services on (go-plugin broker id 2^32-1), and the
// host relays the spans into its own pipeline. Under a go-plugin host (no host services:
// TETHER_HOST_SERVICES is not "served") the spans are dropped.
//
// Put stores the value in memory; Get of a missing key fails with NotFound. Each call opens one
// child span "kv.<method> work" under otelgrpc's server span. At start the plugin records a
// "otelplugin start" span whose parent is the host's launch span (TRACEPARENT/TRACESTATE in the
// environment, OpenTelemetry's environment-variable carrier).
package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"sync"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"tether.test/interop/proto"
	"tether.test/interop/shared"
)

// hostServicesID is the broker id tether hosts serve their host services on.
const hostServicesID = math.MaxUint32

// batchTimeout is how long finished spans wait before they are sent to the host (the SDK's
// default is 5 s; tests wait for them).
const batchTimeout = 100 * time.Millisecond

var tracer = otel.Tracer("tether.test/interop/otelplugin")

type memStore struct {
	mu     sync.Mutex
	values map[string][]byte
}

func (m *memStore) Get(ctx context.Context, req *proto.GetRequest) (*proto.GetResponse, error) {
	_, span := tracer.Start(ctx, "kv.Get work", trace.WithAttributes(attribute.String("kv.key", req.Key)))
	defer span.End()
	m.mu.Lock()
	defer m.mu.Unlock()
	value, ok := m.values[req.Key]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "key %q not found", req.Key)
	}
	return &proto.GetResponse{Value: value}, nil
}

func (m *memStore) Put(ctx context.Context, req *proto.PutRequest) (*proto.Empty, error) {
	_, span := tracer.Start(ctx, "kv.Put work", trace.WithAttributes(attribute.String("kv.key", req.Key)))
	defer span.End()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.values[req.Key] = req.Value
	return &proto.Empty{}, nil
}

// hostExporter sends spans to the host over its host-services connection, dialled on the first
// export: the broker learns the host's address only after the handshake, and the SDK exports
// from its own goroutine, never on a call's path.
type hostExporter struct {
	// served: the host said it serves host services (TETHER_HOST_SERVICES=served); when it did
	// not (a go-plugin host), spans are dropped.
	served bool
	// brokerSet is closed when broker is set.
	brokerSet chan struct{}
	broker    *plugin.GRPCBroker
	mu        sync.Mutex
	inner     sdktrace.SpanExporter
}

func newHostExporter() *hostExporter {
	return &hostExporter{
		served:    os.Getenv("TETHER_HOST_SERVICES") == "served",
		brokerSet: make(chan struct{}),
	}
}

// setBroker is called once, when go-plugin registers the plugin's services.
func (h *hostExporter) setBroker(b *plugin.GRPCBroker) {
	h.broker = b
	close(h.brokerSet)
}

func (h *hostExporter) exporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	select {
	case <-h.brokerSet:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the broker: %w", ctx.Err())
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.inner != nil {
		return h.inner, nil
	}
	conn, err := h.broker.Dial(hostServicesID)
	if err != nil {
		return nil, fmt.Errorf("dialling the host's services: %w", err)
	}
	inner, err := otlptracegrpc.New(ctx, otlptracegrpc.WithGRPCConn(conn))
	if err != nil {
		return nil, err
	}
	h.inner = inner
	return inner, nil
}

func (h *hostExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if !h.served {
		return nil
	}
	inner, err := h.exporter(ctx)
	if err != nil {
		return err
	}
	return inner.ExportSpans(ctx, spans)
}

func (h *hostExporter) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	inner := h.inner
	h.mu.Unlock()
	if inner == nil {
		return nil
	}
	return inner.Shutdown(ctx)
}

// kvPlugin is shared.KVGRPCPlugin plus the broker handed to the exporter.
type kvPlugin struct {
	plugin.Plugin
	impl     proto.KVServer
	exporter *hostExporter
}

func (p *kvPlugin) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	p.exporter.setBroker(broker)
	proto.RegisterKVServer(s, p.impl)
	return nil
}

func (p *kvPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (interface{}, error) {
	return nil, fmt.Errorf("otelplugin is a plugin only")
}

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-h" || os.Args[1] == "--help") {
		fmt.Fprintln(os.Stderr, "otelplugin: a go-plugin KV plugin traced with otelgrpc; run it through a go-plugin host (cookie BASIC_PLUGIN=hello)")
		os.Exit(2)
	}
	exporter := newHostExporter()
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter, sdktrace.WithBatchTimeout(batchTimeout)),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "otelplugin"))),
	)
	otel.SetTracerProvider(provider)
	otel.SetTextMapPropagator(propagation.TraceContext{})

	// The host's launch span, carried in the environment (TRACEPARENT/TRACESTATE).
	launch := otel.GetTextMapPropagator().Extract(context.Background(), propagation.MapCarrier{
		"traceparent": os.Getenv("TRACEPARENT"),
		"tracestate":  os.Getenv("TRACESTATE"),
	})
	_, start := tracer.Start(launch, "otelplugin start")
	start.End()

	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: shared.Handshake,
		Plugins: map[string]plugin.Plugin{shared.PluginName: &kvPlugin{
			impl:     &memStore{values: map[string][]byte{}},
			exporter: exporter,
		}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return plugin.DefaultGRPCServer(append(opts, grpc.StatsHandler(otelgrpc.NewServerHandler())))
		},
	})
	// Serve returns when the host asked the plugin to stop: send what is left while the host
	// still listens.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := provider.Shutdown(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "otelplugin: flushing spans: %v\n", err)
	}
}
