/**
 * gRPC server reflection (`grpc.reflection.v1` and `v1alpha`, with `@grpc/reflection`), so
 * `tether inspect`, `tether call` and grpcurl find the plugin's services without `.proto`
 * files — as go-plugin ≥ 1.2 and the other tether SDKs serve it.
 *
 * `@grpc/reflection` reads proto-loader's package definitions; the SDK only sees the served
 * service definitions, so it rebuilds one from them: every method's request and response type
 * carries the encoded `FileDescriptorProto`s of the files it was loaded with. Only the served
 * services are listed.
 *
 * @module
 */

import type * as grpc from "@grpc/grpc-js";
import type * as protoLoader from "@grpc/proto-loader";
import { ReflectionService } from "@grpc/reflection";

import { definitionOf, type ServiceEntry } from "./endpoint.js";

/** The services reflection itself adds. */
export const REFLECTION_SERVICES: readonly string[] = [
  "grpc.reflection.v1.ServerReflection",
  "grpc.reflection.v1alpha.ServerReflection",
];

/** The full names of `entries` and a package definition with their descriptors. */
export function describe(entries: readonly ServiceEntry[]): { names: string[]; pkg: protoLoader.PackageDefinition } {
  const pkg: protoLoader.PackageDefinition = {};
  const names = new Set<string>();
  for (const entry of entries) {
    const definition = definitionOf(entry.service);
    for (const [method, attributes] of Object.entries(definition)) {
      const name = serviceName(attributes.path);
      if (name === undefined) continue;
      names.add(name);
      for (const [side, type] of [
        ["request", (attributes as unknown as protoLoader.MethodDefinition<object, object>).requestType],
        ["response", (attributes as unknown as protoLoader.MethodDefinition<object, object>).responseType],
      ] as const) {
        if (type !== undefined && Array.isArray(type.fileDescriptorProtos)) pkg[`${name}.${method}.${side}`] = type;
      }
    }
  }
  return { names: [...names], pkg };
}

/** Adds reflection over `entries` to `server`. */
export function serveReflection(server: grpc.Server, entries: readonly ServiceEntry[]): void {
  const { names, pkg } = describe(entries);
  new ReflectionService(pkg, { services: [...names, ...REFLECTION_SERVICES] }).addToServer(server);
}

/** `/pkg.Service/Method` → `pkg.Service`. */
function serviceName(path: string): string | undefined {
  const match = /^\/([^/]+)\/[^/]+$/.exec(path);
  return match?.[1];
}
