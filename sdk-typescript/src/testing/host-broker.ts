/**
 * The host's side of go-plugin's `GRPCBroker`, as the fake host speaks it: it opens the broker
 * stream (`plugin.GRPCBroker/StartStream`) right after connecting, as hosts do, and serves
 * services to the plugin under broker ids (go-plugin's `AcceptAndServe`) — the host services
 * under the fixed id `4294967295` (docs/PROTOCOL.md §10.1), callbacks under ids the test sends
 * in its requests.
 *
 * - **Default mode.** Each id is served on its own unix socket in the host's directory and
 *   announced once (`ConnInfo{service_id, network, address}`); the plugin dials it.
 * - **Multiplexed mode.** Nothing is announced: the plugin knocks for an id; the host
 *   acknowledges when it serves that id (else refuses with go-plugin's "no listener for id N",
 *   which the plugin retries) and routes the next stream the plugin opens to it.
 *
 * Every id is served with the same AutoMTLS as the main connection: the host presents its
 * certificate and accepts only the plugin's.
 *
 * @module
 */

import * as net from "node:net";
import * as path from "node:path";
import * as grpc from "@grpc/grpc-js";

import { HOST_SERVICES_ID, type ConnInfo } from "../broker-stream.js";
import { Endpoint, type ServiceEntry } from "../endpoint.js";
import { removeQuietly } from "../listen.js";
import { internalProtos } from "../protos.js";
import type { Pinned } from "../tls.js";
import type { YamuxStream } from "../yamux.js";
import { TestKitError } from "./errors.js";

/** Milliseconds the calls still running on a served id get when the fake host closes. */
export const SERVED_STOP_GRACE_MS = 1_000;

type BrokerCall = grpc.ClientDuplexStream<ConnInfo, ConnInfo>;

/** The fake host's broker on one connection to the plugin. @internal */
export class HostBroker {
  private readonly endpoints = new Map<number, Endpoint>();
  private readonly listeners: Array<() => void> = [];
  /** Multiplexed mode: ids whose knock was acknowledged, in order; each takes the next stream. */
  private readonly acknowledged: number[] = [];
  private readonly call: BrokerCall;

  constructor(
    channel: grpc.Channel,
    /** The host's identity and the plugin's certificate. */
    private readonly pinned: Pinned,
    /** Where the default mode's sockets go. */
    private readonly hostDir: string,
    private readonly multiplexed: boolean,
  ) {
    const Broker = internalProtos().broker;
    // On the host's one channel (closing this client would close it: the connection does).
    const client = new Broker("localhost", grpc.credentials.createInsecure(), { channelOverride: channel });
    this.call = (client as unknown as { StartStream(): BrokerCall }).StartStream();
    this.call.on("data", (info: ConnInfo) => this.receive(info));
    this.call.on("error", () => undefined); // the stream ends with the plugin
  }

  /** Serves `services` to the plugin under `id` (and, in the default mode, announces it). */
  async serve(id: number, services: readonly ServiceEntry[]): Promise<void> {
    const endpoint = new Endpoint(services, this.pinned);
    this.endpoints.set(id, endpoint);
    if (this.multiplexed) return; // knocks for it are acknowledged from now on
    const name = id === HOST_SERVICES_ID ? "host-services.sock" : `host-${id}.sock`;
    const address = path.join(this.hostDir, name);
    const listener = net.createServer((socket) => endpoint.accept(socket));
    await new Promise<void>((resolve, reject) => {
      listener.once("error", (e) => reject(new TestKitError(`the fake host cannot serve broker id ${id} on ${address}: ${e.message}`)));
      listener.listen(address, () => resolve());
    });
    this.listeners.push(() => {
      listener.close();
      removeQuietly(address);
    });
    this.call.write({ service_id: id, network: "unix", address });
  }

  /** A stream the plugin opened (multiplexed mode): for the id acknowledged longest ago. */
  inbound(stream: YamuxStream): void {
    const id = this.acknowledged.shift();
    const endpoint = id === undefined ? undefined : this.endpoints.get(id);
    if (endpoint === undefined) stream.destroy();
    else endpoint.accept(stream);
  }

  /** Ends the broker stream and every served id. */
  async close(): Promise<void> {
    this.call.end();
    for (const stop of this.listeners.splice(0)) stop();
    await Promise.all([...this.endpoints.values()].map((e) => e.shutdown(SERVED_STOP_GRACE_MS)));
    this.endpoints.clear();
  }

  private receive(info: ConnInfo): void {
    const knock = info.knock ?? undefined;
    // The plugin's announcements of ids it serves, and acknowledgements of knocks this host
    // never sends, need no answer.
    if (knock === undefined || !knock.knock || knock.ack) return;
    const id = info.service_id;
    const served = this.endpoints.has(id);
    if (served) this.acknowledged.push(id);
    this.call.write({
      service_id: id,
      network: "",
      address: "",
      knock: { knock: true, ack: true, error: served ? "" : `no listener for id ${id}` },
    });
  }
}
