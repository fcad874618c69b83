//! Counter plugin: go-plugin's `examples/bidirectional` plugin, written with `tether-sdk`.
//!
//! Serves `proto.Counter` (app version 1, cookie `BASIC_PLUGIN=hello`): the service is
//! [`tether_examples::counter_service::FileCounter`], keeping its numbers in the working
//! directory (`kv_<key>`, go-plugin's format) and adding through the host's `AddHelper`
//! callback (`add_server` 0: the host service of a tether host).
//!
//! ```text
//! cargo build --workspace
//! COUNTER_PLUGIN=target/debug/counter-plugin target/debug/counter-host put c 5
//! COUNTER_PLUGIN=target/debug/counter-plugin target/debug/counter-host put c 7
//! COUNTER_PLUGIN=target/debug/counter-plugin target/debug/counter-host get c   # prints 12
//! ```

use std::process::ExitCode;

use tether_examples::counter::counter_server::CounterServer;
use tether_examples::counter_service::FileCounter;

fn main() -> ExitCode {
    let plugin = tether_sdk::Plugin::new(
        tether_sdk::ServeOptions::new("BASIC_PLUGIN", "hello").app_version(1),
    );
    let broker = plugin.broker();
    plugin
        .add_service(CounterServer::new(FileCounter::new(broker, ".")))
        .file_descriptor_set(tether_examples::counter::FILE_DESCRIPTOR_SET)
        .run()
}
