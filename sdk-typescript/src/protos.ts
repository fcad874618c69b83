/**
 * Loading `.proto` files with `@grpc/proto-loader`: the SDK's own (go-plugin's internal
 * services, gRPC health and tether's `tether.plugins.v1.Plugins`, shipped in the package's
 * `proto/` folder) and the author's.
 *
 * @module
 */

import { fileURLToPath } from "node:url";
import * as path from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

/** The package's `proto/` folder. */
export const SDK_PROTO_DIR = fileURLToPath(new URL("../../proto/", import.meta.url));

/**
 * proto-loader options the SDK uses: field names as written in the `.proto` (`add_server`,
 * `service_id`), 64-bit integers as JavaScript numbers, enums as numbers, defaults filled in.
 * Numbers beyond 2^53 lose precision; pass other options to {@link loadProto} if that matters.
 */
export const PROTO_LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: Number,
  defaults: true,
  oneofs: true,
};

/**
 * Loads one `.proto` file (and its imports, from `includeDirs` and the file's own folder) as
 * a grpc-js package object: `loadProto("kv.proto").proto.KV` is the `KV` service's client
 * constructor, whose `.service` is the definition to serve.
 */
export function loadProto(
  file: string,
  options: protoLoader.Options = {},
): grpc.GrpcObject {
  const includeDirs = [path.dirname(path.resolve(file)), SDK_PROTO_DIR, ...(options.includeDirs ?? [])];
  const definition = protoLoader.loadSync(path.resolve(file), { ...PROTO_LOADER_OPTIONS, ...options, includeDirs });
  return grpc.loadPackageDefinition(definition);
}

/** A service's client constructor inside a loaded package object, by its full name. */
export function serviceClient(pkg: grpc.GrpcObject, fullName: string): grpc.ServiceClientConstructor {
  let node: unknown = pkg;
  for (const part of fullName.split(".")) {
    node = (node as Record<string, unknown> | undefined)?.[part];
  }
  if (typeof node !== "function" || !("service" in node)) {
    throw new Error(`no gRPC service ${fullName} in the loaded .proto files`);
  }
  return node as grpc.ServiceClientConstructor;
}

/** The SDK's internal services, loaded once. */
export interface InternalProtos {
  broker: grpc.ServiceClientConstructor;
  controller: grpc.ServiceClientConstructor;
  stdio: grpc.ServiceClientConstructor;
  health: grpc.ServiceClientConstructor;
  /** tether's plugin-to-plugin host service (docs/PROTOCOL.md §10.3). */
  plugins: grpc.ServiceClientConstructor;
}

let internal: InternalProtos | undefined;

/**
 * go-plugin's `plugin.GRPCBroker`, `plugin.GRPCController`, `plugin.GRPCStdio`,
 * `grpc.health.v1.Health` and tether's `tether.plugins.v1.Plugins`.
 */
export function internalProtos(): InternalProtos {
  if (internal === undefined) {
    const files = ["plugin/grpc_broker.proto", "plugin/grpc_controller.proto", "plugin/grpc_stdio.proto", "grpc/health/v1/health.proto", "tether/plugins/v1/plugins.proto"];
    const definition = protoLoader.loadSync(
      files.map((f) => path.join(SDK_PROTO_DIR, f)),
      { ...PROTO_LOADER_OPTIONS, includeDirs: [SDK_PROTO_DIR] },
    );
    const pkg = grpc.loadPackageDefinition(definition);
    internal = {
      broker: serviceClient(pkg, "plugin.GRPCBroker"),
      controller: serviceClient(pkg, "plugin.GRPCController"),
      stdio: serviceClient(pkg, "plugin.GRPCStdio"),
      health: serviceClient(pkg, "grpc.health.v1.Health"),
      plugins: serviceClient(pkg, "tether.plugins.v1.Plugins"),
    };
  }
  return internal;
}
