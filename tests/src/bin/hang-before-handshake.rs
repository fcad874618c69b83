//! Misbehaving plugin: starts a grandchild, writes to stderr, and never prints a handshake.
//! The host must time out, and stop the whole process group.

fn main() {
    let _grandchild = tether_tests::misbehave::spawn_sleeping_grandchild();
    eprintln!("warming up a very slow cache");
    tether_tests::misbehave::park_forever();
}
