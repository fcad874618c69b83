/** The examples' file naming: `kv_<key>` in the working directory, as go-plugin's examples do. */

import * as grpc from "@grpc/grpc-js";

/** The file holding `key`'s value; throws `INVALID_ARGUMENT` for keys that could name another file. */
export function pathFor(key: string): string {
  if (key === "" || key === "." || key === ".." || /[/\\\0]/.test(key)) {
    throw Object.assign(
      new Error(`invalid key ${JSON.stringify(key)}: keys must be non-empty, not '.' or '..', and contain no '/', '\\' or NUL`),
      { code: grpc.status.INVALID_ARGUMENT },
    );
  }
  return `kv_${key}`;
}
