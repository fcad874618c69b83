//! X25519 key shares made before the handshake that uses them.
//!
//! Every TLS 1.3 handshake — the launch's full one and each brokered connection's resumed one —
//! starts with an ephemeral X25519 key pair on each side: the client's goes into its
//! `ClientHello`, the server's into its `ServerHello`. Generating one is a scalar
//! multiplication (≈ 35 µs here) on the critical path of every handshake, on both sides.
//! [`X25519_AHEAD`] hands out a key pair a thread of its own made while the process was waiting
//! (for a plugin's handshake line, for the peer's next message), and makes the next one after
//! each hand-out (bench/BENCHMARKS.md, Decisions).
//!
//! Each key pair is still fresh, from *ring*'s generator (the operating system's), used for
//! exactly one handshake and then dropped: it only exists a little earlier. Without its thread
//! (one could not be started) every handshake makes its own, as before.

use std::sync::{Condvar, Mutex, MutexGuard, Once, PoisonError};

use rustls::NamedGroup;
use rustls::crypto::{ActiveKeyExchange, SupportedKxGroup};

/// X25519 with its next key pair made ahead; the first group tether offers.
pub(crate) static X25519_AHEAD: KeySharesAhead = KeySharesAhead {
    ready: Mutex::new(None),
    taken: Condvar::new(),
    made: Condvar::new(),
    filler: Once::new(),
};

/// A key-exchange group whose next key pair is made ahead (see the [module docs](self)).
pub(crate) struct KeySharesAhead {
    /// The next key pair, once made.
    ready: Mutex<Option<Box<dyn ActiveKeyExchange>>>,
    /// Signalled when `ready` was emptied.
    taken: Condvar,
    /// Signalled when `ready` was filled.
    made: Condvar,
    filler: Once,
}

/// The group made ahead: *ring*'s X25519.
fn inner() -> &'static dyn SupportedKxGroup {
    rustls::crypto::ring::kx_group::X25519
}

impl KeySharesAhead {
    fn lock(&self) -> MutexGuard<'_, Option<Box<dyn ActiveKeyExchange>>> {
        // The slot holds at most one key pair: a panic while holding the lock left it valid.
        self.ready.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts the thread that keeps the next key pair ready (once per process), so that the
    /// first handshake finds one too: call it as early as a handshake is known to come.
    pub(crate) fn start_making(&'static self) {
        self.filler.call_once(|| {
            // Without the thread, handshakes make their own key pairs, as without this.
            let _ = std::thread::Builder::new()
                .name("tether-kx".into())
                .spawn(move || self.keep_one_ready());
        });
    }

    fn keep_one_ready(&self) {
        loop {
            let made = inner().start();
            let mut ready = self.lock();
            match made {
                Ok(key_pair) => {
                    *ready = Some(key_pair);
                    self.made.notify_all();
                }
                // *ring*'s generator failed: handshakes make their own (and fail the same way).
                Err(_) => return,
            }
            while ready.is_some() {
                ready = self
                    .taken
                    .wait(ready)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        }
    }
}

impl std::fmt::Debug for KeySharesAhead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySharesAhead").finish_non_exhaustive()
    }
}

impl SupportedKxGroup for KeySharesAhead {
    fn start(&self) -> Result<Box<dyn ActiveKeyExchange>, rustls::Error> {
        let ready = self.lock().take();
        match ready {
            Some(key_pair) => {
                self.taken.notify_one();
                Ok(key_pair)
            }
            None => inner().start(),
        }
    }

    fn name(&self) -> NamedGroup {
        inner().name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits (on the filler's signal, up to 10 s) until a key pair is ready.
    fn ready_soon() -> bool {
        let ready = X25519_AHEAD.lock();
        let (ready, _) = X25519_AHEAD
            .made
            .wait_timeout_while(ready, std::time::Duration::from_secs(10), |r| r.is_none())
            .unwrap();
        ready.is_some()
    }

    #[test]
    fn a_key_pair_is_ready_before_a_handshake_asks_and_again_after_each_hand_out() {
        X25519_AHEAD.start_making();
        assert!(ready_soon());
        X25519_AHEAD.start().unwrap();
        assert!(ready_soon());
    }

    #[test]
    fn every_hand_out_is_a_new_key_pair_that_agrees_with_its_peer() {
        X25519_AHEAD.start_making();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..20 {
            let key_pair = X25519_AHEAD.start().unwrap();
            assert_eq!(key_pair.group(), NamedGroup::X25519);
            assert!(
                seen.insert(key_pair.pub_key().to_vec()),
                "a key share was handed out twice"
            );
        }
        // Two sides agree on a secret with key pairs from it.
        let (a, b) = (X25519_AHEAD.start().unwrap(), X25519_AHEAD.start().unwrap());
        let (a_pub, b_pub) = (a.pub_key().to_vec(), b.pub_key().to_vec());
        let from_a = a.complete(&b_pub).unwrap();
        let from_b = b.complete(&a_pub).unwrap();
        assert_eq!(from_a.secret_bytes(), from_b.secret_bytes());
    }
}
