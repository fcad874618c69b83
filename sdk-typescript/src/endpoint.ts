/**
 * A grpc-js server fed with connections the SDK accepted itself (a unix socket, a TCP socket
 * or a yamux stream), after the pinned TLS handshake when AutoMTLS is on. grpc-js never binds
 * anything: `createConnectionInjector` takes each ready connection.
 *
 * @module
 */

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

  constructor(services: readonly ServiceEntry[], pinned: Pinned | undefined, options: grpc.ServerOptions = {}) {
    this.server = new grpc.Server(options);
    for (const { service, implementation } of services) {
      this.server.addService(definitionOf(service), implementation);
    }
    this.injector = this.server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
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
}
