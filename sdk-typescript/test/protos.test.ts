import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";

import { internalProtos } from "../src/protos.js";

const here = (p: string): string => fileURLToPath(new URL(p, import.meta.url));

// The package ships copies of the repository's .proto files (npm packs only its own folder).
test("the shipped .proto copies match the repository's", { skip: !existsSync(here("../../../proto/proto/plugin")) }, () => {
  for (const [copies, originals] of [
    ["../../proto/plugin/", "../../../proto/proto/plugin/"],
    ["../../examples/proto/", "../../../examples/proto/"],
    ["../../proto/tether/plugins/v1/", "../../../proto/proto/tether/plugins/v1/"],
  ] as const) {
    for (const name of readdirSync(here(copies))) {
      assert.equal(readFileSync(here(copies + name), "utf8"), readFileSync(here(originals + name), "utf8"), `${copies}${name} is stale`);
    }
  }
});

test("the internal services load with go-plugin's names", () => {
  const p = internalProtos();
  assert.ok(p.broker.service.StartStream);
  assert.ok(p.controller.service.Shutdown);
  assert.ok(p.stdio.service.StreamStdio);
  assert.equal(p.health.service.Check?.path, "/grpc.health.v1.Health/Check");
  assert.equal(p.plugins.service.Open?.path, "/tether.plugins.v1.Plugins/Open");
});
