/**
 * The grpc-js channels {@link GRPCBroker.dial} and {@link GRPCBroker.hostServices} put their
 * clients on.
 *
 * A dial may set up more than a channel: in the multiplexed mode a relay (a private unix
 * socket and its listener, see `relay.ts`), and in both modes an entry in the broker's list of
 * what to close when the plugin stops. Plugins that dial a fresh id per call (go-plugin's
 * `examples/bidirectional`) close each client after the call; grpc-js's `Client.close()`
 * closes the client's channel, and that close must end those too, or a long-running plugin
 * gathers one relay per call until it stops.
 *
 * @module
 */

import * as grpc from "@grpc/grpc-js";

/** A brokered connection whose close (its client's `close()`) also releases what its dial set up. */
export class DialledChannel extends grpc.Channel {
  private ended = false;

  /** @internal */
  constructor(
    target: string,
    credentials: grpc.ChannelCredentials,
    options: grpc.ChannelOptions,
    private readonly release: () => void,
  ) {
    super(target, credentials, options);
  }

  /** Closes the connection (running calls finish first) and releases its dial's relay, once. */
  override close(): void {
    this.end();
  }

  /** Closes it whoever shares it (the broker, when the plugin stops). @internal */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    super.close();
    this.release();
  }
}

/**
 * The host services' connection, shared by every client {@link GRPCBroker.hostServices}
 * returns: a client's `close()` leaves it open for the others; the broker ends it when the
 * plugin stops.
 */
export class SharedChannel extends DialledChannel {
  override close(): void {
    // shared: ended by the broker (end()), not by one of its clients
  }
}
