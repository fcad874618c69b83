//! Misbehaving plugin: starts a grandchild, writes to stderr, and never prints a handshake.
//! The host must time out, and stop the whole process group.

fn main() {
    let mut grandchild = tether_tests::misbehave::spawn_sleeping_grandchild();
    eprintln!("warming up a very slow cache");
    // Blocks until the grandchild ends: in practice until the host kills the process group.
    let _ = grandchild.wait();
    tether_tests::misbehave::park_forever();
}
