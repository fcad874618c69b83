/**
 * `tether-plugin/testing`: unit-test a plugin's services in-process, as the Rust
 * (`tether-sdk-test`) and Python (`tether_plugin.testing`) kits do.
 *
 * {@link FakeHost} serves the services with the SDK's own serve sequence in the test's process,
 * behind a fake host that speaks the real protocol: the launch variables, the handshake line,
 * AutoMTLS pinned both ways, `plugin.GRPCBroker` in go-plugin's default or multiplexed mode, host
 * services, and granted secrets and config files delivered as files the plugin's
 * `secrets.read(name)` / `config.read(name)` find. {@link LaunchedPlugin} starts the built
 * plugin as a process the way a host does, and checks that it stops cleanly.
 *
 * ```ts
 * import { test } from "node:test";
 * import { fakeHost } from "tether-plugin/testing";
 *
 * test("greets with the granted salutation and the host's title", async (t) => {
 *   const host = fakeHost(t, { secrets: { salutation: "Hello" } }); // closed when the test ends
 *   const titles = host.acceptAndServe([{ service: Titles, implementation: { Title } }]);
 *   await host.serve([{ service: Greeter, implementation: greeterService(host.broker) }]);
 *   const reply = await greet(host.client<GreeterClient>(Greeter), { name: "Ada", titles_server: titles });
 *   assert.equal(reply.text, "Hello, Dr. Ada");
 * });
 * ```
 *
 * @module
 */

export {
  FakeHost,
  fakeHost,
  DEFAULT_START_TIMEOUT_MS,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_SHUTDOWN_TIMEOUT_MS,
  FAKE_HOST_COOKIE,
} from "./fake-host.js";
export type { FakeHostOptions } from "./fake-host.js";
export type { GrantedValues } from "./delivery.js";
export { LaunchedPlugin, launchPlugin, DEFAULT_LAUNCH_TIMEOUT_MS, DEFAULT_EXIT_GRACE_MS, STDERR_TAIL_BYTES } from "./launched.js";
export type { LaunchOptions } from "./launched.js";
export { SERVED_STOP_GRACE_MS } from "./host-broker.js";
export { parseHandshakeLine } from "./handshake.js";
export type { Announced } from "./handshake.js";
export { TestKitError } from "./errors.js";
