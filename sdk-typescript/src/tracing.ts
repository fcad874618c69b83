/**
 * The plugin's traces, with no code of the author's — when the OpenTelemetry packages are
 * installed (optional peer dependencies: without them nothing here runs and nothing changes).
 *
 * When the host records the launching span (it sent `TRACEPARENT`) and serves host services
 * (`TETHER_HOST_SERVICES=served`), {@link Tracing.start} sets up: every call the plugin serves
 * is a server span continuing the caller's `traceparent` metadata, every call it makes on a
 * brokered client (callbacks, host services) is a client span carrying the current context
 * (Node's `AsyncLocalStorage`, so an `await` inside a handler keeps it), its start-up is a span
 * under the host's launch span, and the finished spans go in batches to the host's OTLP relay
 * over the host-services connection (the plugin has no network and no exporter settings).
 *
 * The spans are the host's and the other SDKs': named `package.Service/Method`, with
 * OpenTelemetry's RPC attributes (`rpc.system.name` = `grpc`, `rpc.method`,
 * `rpc.response.status_code` as gRPC's upper-case code name); a client span is an error for
 * every status but `OK`, a server span only for the statuses that mean the server failed.
 * The OTLP encoding is OpenTelemetry's own (`@opentelemetry/otlp-transformer`), sent to the
 * relay's `TraceService/Export` on the broker's connection — `@opentelemetry/exporter-trace-otlp-grpc`
 * dials a network address of its own, which a plugin does not have.
 *
 * The OpenTelemetry modules are only imported (dynamically) here, and their types never appear
 * in the package's public declarations (the settings are `trace-settings.ts`).
 *
 * @module
 */

import * as path from "node:path";
import * as grpc from "@grpc/grpc-js";
import type * as OtelApi from "@opentelemetry/api";
import type * as OtelCore from "@opentelemetry/core";
import type * as OtelResources from "@opentelemetry/resources";
import type * as OtelSdk from "@opentelemetry/sdk-trace-base";
import type * as OtelAsyncHooks from "@opentelemetry/context-async-hooks";
import type * as OtelTransformer from "@opentelemetry/otlp-transformer";

import { definitionOf, type ServiceEntry } from "./endpoint.js";
import {
  type BrokerTracing,
  SPAN_BATCH_DELAY_MS,
  SPAN_EXPORT_TIMEOUT_MS,
  SPAN_FLUSH_TIMEOUT_MS,
  TRACEPARENT_VAR,
  TRACESTATE_VAR,
  untraced,
} from "./trace-settings.js";

/** The name of the SDK's instrumentation scope. */
const SCOPE = "tether-plugin";
const EXPORT_PATH = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
/** Server statuses that mean the server failed (OpenTelemetry's gRPC conventions). */
const SERVER_ERRORS: ReadonlySet<number> = new Set([
  grpc.status.UNKNOWN,
  grpc.status.DEADLINE_EXCEEDED,
  grpc.status.UNIMPLEMENTED,
  grpc.status.INTERNAL,
  grpc.status.UNAVAILABLE,
  grpc.status.DATA_LOSS,
]);

/** The OpenTelemetry modules tracing uses. @internal */
export interface OtelModules {
  api: typeof OtelApi;
  core: typeof OtelCore;
  resources: typeof OtelResources;
  sdk: typeof OtelSdk;
  asyncHooks: typeof OtelAsyncHooks;
  transformer: typeof OtelTransformer;
}

/** Imports the OpenTelemetry modules; rejects when one is not installed. @internal */
export async function importOtel(): Promise<OtelModules> {
  const [api, core, resources, sdk, asyncHooks, transformer] = await Promise.all([
    import("@opentelemetry/api"),
    import("@opentelemetry/core"),
    import("@opentelemetry/resources"),
    import("@opentelemetry/sdk-trace-base"),
    import("@opentelemetry/context-async-hooks"),
    import("@opentelemetry/otlp-transformer"),
  ]);
  return { api, core, resources, sdk, asyncHooks, transformer };
}

/** What the exporter needs of the broker: a client on the host-services connection. */
export interface HostServices {
  hostServices(Client: grpc.ServiceClientConstructor): Promise<grpc.Client>;
}

type ExportClient = grpc.Client & {
  Export(body: Buffer, options: grpc.CallOptions, callback: (error: grpc.ServiceError | null) => void): void;
};

/** The relay's OTLP trace service, its messages already encoded. */
const TraceService = grpc.makeGenericClientConstructor(
  {
    Export: {
      path: EXPORT_PATH,
      requestStream: false,
      responseStream: false,
      requestSerialize: (body: Buffer) => body,
      requestDeserialize: (body: Buffer) => body,
      responseSerialize: (body: Buffer) => body,
      responseDeserialize: (body: Buffer) => body,
    },
  },
  "TraceService",
);

const metadataGetter: OtelApi.TextMapGetter<grpc.Metadata> = {
  get: (metadata, key) => metadata.get(key).map(String),
  keys: (metadata) => Object.keys(metadata.getMap()),
};
const metadataSetter: OtelApi.TextMapSetter<grpc.Metadata> = {
  set: (metadata, key, value) => metadata.set(key, value),
};

type Handler = (this: unknown, ...args: unknown[]) => unknown;

/** What tests replace. @internal */
export interface TracingOptions {
  /** Imports the OpenTelemetry modules ({@link importOtel}). */
  load?: () => Promise<OtelModules>;
  /** Where spans go instead of the host's relay. */
  exporter?: OtelSdk.SpanExporter;
}

/** The plugin's traces: made by {@link Tracing.start} when the host asked for them. @internal */
export class Tracing implements BrokerTracing {
  /** Client spans on every brokered client, the context in the metadata. */
  readonly clientInterceptor: grpc.Interceptor;
  private readonly w3c: OtelCore.W3CTraceContextPropagator;

  private constructor(
    private readonly otel: OtelModules,
    private readonly provider: OtelSdk.BasicTracerProvider,
    private readonly tracer: OtelApi.Tracer,
    private readonly env: Record<string, string | undefined>,
  ) {
    this.w3c = new otel.core.W3CTraceContextPropagator();
    this.clientInterceptor = (options, nextCall) => this.intercept(options, nextCall);
  }

  /**
   * The plugin's tracing, or `undefined` — when the host sent no `TRACEPARENT` (it records no
   * trace), serves no host services (no relay to send spans to), or the OpenTelemetry packages
   * are not installed (`load` rejects).
   */
  static async start(
    broker: HostServices,
    env: Record<string, string | undefined> = process.env,
    options: TracingOptions = {},
  ): Promise<Tracing | undefined> {
    if (!env[TRACEPARENT_VAR] || env.TETHER_HOST_SERVICES !== "served") return undefined;
    let otel: OtelModules;
    try {
      otel = await (options.load ?? importOtel)();
    } catch {
      return undefined;
    }
    const { api, sdk, resources, asyncHooks } = otel;
    // The author's own context manager and provider, if they installed them, stay theirs.
    const contextManager = new asyncHooks.AsyncLocalStorageContextManager().enable();
    if (!api.context.setGlobalContextManager(contextManager)) contextManager.disable();
    const name = path.basename(process.argv[1] ?? "") || "tether-plugin";
    const provider = new sdk.BasicTracerProvider({
      resource: resources.defaultResource().merge(resources.resourceFromAttributes({ "service.name": name })),
      spanProcessors: [
        new sdk.BatchSpanProcessor(options.exporter ?? new HostExporter(broker, otel), {
          scheduledDelayMillis: SPAN_BATCH_DELAY_MS,
          exportTimeoutMillis: SPAN_EXPORT_TIMEOUT_MS,
        }),
      ],
    });
    api.trace.setGlobalTracerProvider(provider);
    return new Tracing(otel, provider, provider.getTracer(SCOPE), env);
  }

  /** The start-up span, a child of the host's launch span; end it once the handshake is out. */
  startSpan(): OtelApi.Span {
    const { api } = this.otel;
    const carrier: Record<string, string> = { traceparent: this.env[TRACEPARENT_VAR] ?? "" };
    const state = this.env[TRACESTATE_VAR];
    if (state) carrier.tracestate = state;
    const parent = this.w3c.extract(api.ROOT_CONTEXT, carrier, api.defaultTextMapGetter);
    return this.tracer.startSpan("tether.plugin.start", {}, parent);
  }

  /** `entries` with a server span around every traced method's implementation. */
  serve(entries: readonly ServiceEntry[]): ServiceEntry[] {
    return entries.map(({ service, implementation }) => {
      // Its own methods stay reachable (and `this` in a wrapped one is the original).
      const traced = Object.create(implementation) as grpc.UntypedServiceImplementation;
      for (const [name, method] of Object.entries(definitionOf(service))) {
        if (untraced(method.path)) continue;
        const key = implementation[name] !== undefined ? name : method.originalName;
        const handler = key === undefined ? undefined : implementation[key];
        if (key === undefined || typeof handler !== "function") continue;
        traced[key] = this.served(method, handler as Handler, implementation) as grpc.UntypedHandleCall;
      }
      return { service, implementation: traced };
    });
  }

  /** Sends what is finished to the host (at most {@link SPAN_FLUSH_TIMEOUT_MS}), then stops. */
  async close(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, SPAN_FLUSH_TIMEOUT_MS)));
    await Promise.race([this.provider.shutdown().catch(() => undefined), timeout]);
    clearTimeout(timer);
  }

  private served(method: grpc.MethodDefinition<unknown, unknown>, handler: Handler, self: object): Handler {
    const { api } = this.otel;
    return (...args: unknown[]) => {
      const call = args[0] as { metadata: grpc.Metadata; once(event: string, listener: (e?: unknown) => void): void };
      const parent = this.w3c.extract(api.ROOT_CONTEXT, call.metadata, metadataGetter);
      const span = this.startCall(method.path, api.SpanKind.SERVER, parent);
      let ended = false;
      const end = (code: number): void => {
        if (ended) return;
        ended = true;
        this.end(span, code, SERVER_ERRORS.has(code));
      };
      const context = api.trace.setSpan(parent, span);
      if (!method.responseStream) {
        // Unary and client-streaming calls answer through their callback.
        const done = args[1] as (error: { code?: number } | null, ...rest: unknown[]) => void;
        const answer = (error: { code?: number } | null, ...rest: unknown[]): void => {
          end(error ? (error.code ?? grpc.status.UNKNOWN) : grpc.status.OK);
          done(error, ...rest);
        };
        return api.context.with(context, () => handler.call(self, call, answer));
      }
      call.once("finish", () => end(grpc.status.OK));
      call.once("error", (e) => end((e as { code?: number } | undefined)?.code ?? grpc.status.UNKNOWN));
      call.once("cancelled", () => end(grpc.status.CANCELLED));
      return api.context.with(context, () => handler.call(self, ...args));
    };
  }

  private intercept(options: grpc.InterceptorOptions, nextCall: Parameters<grpc.Interceptor>[1]): grpc.InterceptingCall {
    const methodPath = options.method_definition.path;
    if (untraced(methodPath)) return new grpc.InterceptingCall(nextCall(options));
    const { api } = this.otel;
    const parent = api.context.active();
    const span = this.startCall(methodPath, api.SpanKind.CLIENT, parent);
    const context = api.trace.setSpan(parent, span);
    return new grpc.InterceptingCall(nextCall(options), {
      start: (metadata, _listener, next) => {
        this.w3c.inject(context, metadata, metadataSetter);
        next(metadata, {
          onReceiveStatus: (status, nextStatus) => {
            this.end(span, status.code, status.code !== grpc.status.OK);
            nextStatus(status);
          },
        });
      },
    });
  }

  private startCall(methodPath: string, kind: OtelApi.SpanKind, parent: OtelApi.Context): OtelApi.Span {
    const name = methodPath.replace(/^\//, "");
    return this.tracer.startSpan(name, { kind, attributes: { "rpc.system.name": "grpc", "rpc.method": name } }, parent);
  }

  private end(span: OtelApi.Span, code: number, error: boolean): void {
    span.setAttribute("rpc.response.status_code", grpc.status[code] ?? String(code));
    if (error) span.setStatus({ code: this.otel.api.SpanStatusCode.ERROR });
    span.end();
  }
}

/** Exports to the host's relay: the OTLP trace service on the host-services connection. */
class HostExporter implements OtelSdk.SpanExporter {
  constructor(
    private readonly broker: HostServices,
    private readonly otel: OtelModules,
  ) {}

  export(spans: OtelSdk.ReadableSpan[], done: (result: OtelCore.ExportResult) => void): void {
    const { ExportResultCode } = this.otel.core;
    const body = this.otel.transformer.ProtobufTraceSerializer.serializeRequest(spans);
    if (body === undefined) {
      done({ code: ExportResultCode.FAILED, error: new Error("the spans could not be encoded") });
      return;
    }
    this.broker.hostServices(TraceService).then(
      (client) =>
        (client as ExportClient).Export(Buffer.from(body), { deadline: Date.now() + SPAN_EXPORT_TIMEOUT_MS }, (error) =>
          done(error ? { code: ExportResultCode.FAILED, error } : { code: ExportResultCode.SUCCESS }),
        ),
      (error: Error) => done({ code: ExportResultCode.FAILED, error }),
    );
  }

  async shutdown(): Promise<void> {
    // Nothing to release: the connection is the broker's.
  }
}
