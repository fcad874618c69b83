/**
 * A grpc-js server fed with connections the SDK accepted itself (a unix socket, a TCP socket
 * or a yamux stream), after the pinned TLS handshake when AutoMTLS is on. grpc-js never binds
 * anything: `createConnectionInjector` takes each ready connection.
 *
 * @module
 */

import * as http2 from "node:http2";
import type { Duplex } from "node:stream";
import * as grpc from "@grpc/grpc-js";

import { TlsAcceptor, type Pinned } from "./tls.js";

/** A service to serve: its definition (or a loaded client constructor) and its implementation. */
export interface ServiceEntry {
  service: grpc.ServiceDefinition | grpc.ServiceClientConstructor;
  implementation: grpc.UntypedServiceImplementation;
}

/** The definition inside a {@link ServiceEntry}. */
export function definitionOf(service: ServiceEntry["service"]): grpc.ServiceDefinition {
  return typeof service === "function" ? service.service : service;
}

/** One gRPC server and the connections given to it. */
export class Endpoint {
  readonly server: grpc.Server;
  private readonly injector: ReturnType<grpc.Server["createConnectionInjector"]>;
  private readonly tls: TlsAcceptor | undefined;
  private stopped = false;
  /** The HTTP/2 streams open on this server's connections. */
  private readonly streams = new Set<http2.ServerHttp2Stream>();

  constructor(services: readonly ServiceEntry[], pinned: Pinned | undefined, options: grpc.ServerOptions = {}) {
    this.server = new grpc.Server(options);
    for (const { service, implementation } of services) {
      this.server.addService(definitionOf(service), implementation);
    }
    this.injector = this.server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
    this.trackStreams();
    this.tls =
      pinned === undefined
        ? undefined
        : new TlsAcceptor(pinned, (socket) => {
            if (this.stopped) socket.destroy();
            else this.injector.injectConnection(socket);
          });
  }

  /** Serves gRPC on `raw` (TLS first when pinned). */
  accept(raw: Duplex): void {
    if (this.stopped) {
      raw.destroy();
      return;
    }
    if (this.tls === undefined) this.injector.injectConnection(raw);
    else this.tls.accept(raw);
  }

  /**
   * Stops: refuses new calls, lets running ones finish for up to `graceMs`, then cancels
   * them. Resolves once every connection is closed.
   */
  shutdown(graceMs: number): Promise<void> {
    this.stopped = true;
    // grpc-js's tryShutdown closes each connection gracefully, which waits for every stream to
    // close on both sides. A stream whose call has answered completely (trailers sent) but whose
    // client keeps its own half open — a host's StartStream, which it ends only when the plugin
    // is gone — would hold the plugin for the whole grace period. HTTP/2 lets a server that
    // sent a complete response end such a stream with RST_STREAM(NO_ERROR) (RFC 9113 §8.1):
    // done now for answered streams and, for calls still running, as soon as they answer.
    for (const stream of this.streams) this.closeWhenAnswered(stream);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, graceMs);
      this.server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /**
   * Follows the HTTP/2 streams of the server's connections. grpc-js exposes no hook for
   * them: its connection injector owns one `http2.Http2Server` (kept in the server's private
   * `http2Servers` map), whose `stream` event is Node's public API. Without it (another
   * grpc-js layout) shutdown still works, only waiting for the client as grpc-js does.
   */
  private trackStreams(): void {
    const servers = (this.server as unknown as { http2Servers?: Map<http2.Http2Server, unknown> }).http2Servers;
    for (const h2 of servers?.keys() ?? []) {
      h2.on("stream", (stream: http2.ServerHttp2Stream) => {
        this.streams.add(stream);
        stream.once("close", () => this.streams.delete(stream));
        if (this.stopped) this.closeWhenAnswered(stream);
      });
    }
  }

  private closeWhenAnswered(stream: http2.ServerHttp2Stream): void {
    const check = (): void => {
      if (stream.closed || stream.destroyed) return;
      // localClose: this side sent END_STREAM (the trailers), i.e. the call has answered.
      if (stream.state.localClose) stream.close(http2.constants.NGHTTP2_NO_ERROR);
    };
    check();
    // The trailers go out after the last data frame ('finish'), in a later turn.
    stream.once("finish", () => setImmediate(check));
  }
}
