//! The connection-info table of a [`GrpcBroker`](super::GrpcBroker): `ConnInfo`s the peer
//! announced before anyone dialled their id, dials waiting for one, and (multiplexed mode)
//! knocks for ids not served yet — each kept for the unclaimed TTL, at most [`MAX_UNCLAIMED`]
//! of each.
//!
//! Sans-IO: the caller passes the time and does the waiting; nothing here blocks, sleeps or
//! touches a socket, so the rules (TTL, claim, knock, cap) are unit-tested on their own.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tether_proto::plugin::ConnInfo;
use tokio::sync::oneshot;

/// At most this many unclaimed `ConnInfo`s (and, multiplexed, knocks for ids not served) are
/// kept; more are dropped (with a warning), so a peer cannot grow this side's memory by
/// announcing or knocking on ids nobody uses.
pub const MAX_UNCLAIMED: usize = 1024;

/// The broker id under which a tether host serves its *host services* (services every plugin
/// of that host can reach without being sent an id): the highest id, which go-plugin's
/// counters (starting at 1) never reach. Its connection info does not expire and may be dialled
/// any number of times. go-plugin hosts do not serve it.
pub const HOST_SERVICES_ID: u32 = u32::MAX;

/// A `ConnInfo` that arrived, or dials waiting for one.
#[derive(Debug)]
enum Slot {
    Arrived { info: ConnInfo, at: Instant },
    Waiting(Vec<oneshot::Sender<ConnInfo>>),
}

/// Whether an entry was kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stored {
    /// It was handed to the dials waiting for it.
    Delivered,
    /// It is kept until it is claimed or expires.
    Kept,
    /// The table already holds [`MAX_UNCLAIMED`] entries of its kind; it was dropped.
    Full,
}

/// The answer to a dial's claim of an id.
#[derive(Debug)]
pub(super) enum Claim {
    /// The peer's `ConnInfo` was already there.
    Ready(ConnInfo),
    /// Not yet: it is sent here when it arrives (the sender is dropped when the table is
    /// cleared).
    Wait(oneshot::Receiver<ConnInfo>),
}

/// See the [module](self) documentation.
#[derive(Debug)]
pub(super) struct ConnInfoTable {
    ttl: Duration,
    slots: HashMap<u32, Slot>,
    /// Multiplexed mode: knocks for ids not served yet, with their arrival time.
    knocks: HashMap<u32, Instant>,
}

impl ConnInfoTable {
    /// An empty table whose unclaimed entries live for `ttl`.
    pub(super) fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            slots: HashMap::new(),
            knocks: HashMap::new(),
        }
    }

    /// The peer announced `info` at `now`: it goes to the dials waiting for its id, else it is
    /// kept (unless the table is full). Expired entries and abandoned waits are forgotten first.
    pub(super) fn arrive(&mut self, info: ConnInfo, now: Instant) -> Stored {
        let ttl = self.ttl;
        self.slots.retain(|id, slot| match slot {
            Slot::Arrived { at, .. } => {
                *id == HOST_SERVICES_ID || now.saturating_duration_since(*at) < ttl
            }
            Slot::Waiting(waiters) => {
                waiters.retain(|w| !w.is_closed());
                !waiters.is_empty()
            }
        });
        let id = info.service_id;
        match self.slots.remove(&id) {
            Some(Slot::Waiting(waiters)) => {
                for waiter in waiters {
                    // A waiter that gave up meanwhile simply misses it.
                    let _ = waiter.send(info.clone());
                }
                Stored::Delivered
            }
            Some(Slot::Arrived { .. }) | None => {
                if self.slots.len() >= MAX_UNCLAIMED {
                    return Stored::Full;
                }
                self.slots.insert(id, Slot::Arrived { info, at: now });
                Stored::Kept
            }
        }
    }

    /// A dial for `id` at `now`: the `ConnInfo` if it arrived within the TTL (it is then
    /// consumed, except [`HOST_SERVICES_ID`]'s, which stays for later dials), else a receiver
    /// for when it arrives.
    pub(super) fn claim(&mut self, id: u32, now: Instant) -> Claim {
        match self.slots.remove(&id) {
            Some(Slot::Arrived { info, at }) if id == HOST_SERVICES_ID => {
                self.slots.insert(
                    id,
                    Slot::Arrived {
                        info: info.clone(),
                        at,
                    },
                );
                Claim::Ready(info)
            }
            Some(Slot::Arrived { info, at }) if now.saturating_duration_since(at) < self.ttl => {
                Claim::Ready(info)
            }
            Some(Slot::Waiting(mut waiters)) => {
                let (tx, rx) = oneshot::channel();
                waiters.push(tx);
                self.slots.insert(id, Slot::Waiting(waiters));
                Claim::Wait(rx)
            }
            Some(Slot::Arrived { .. }) | None => {
                let (tx, rx) = oneshot::channel();
                self.slots.insert(id, Slot::Waiting(vec![tx]));
                Claim::Wait(rx)
            }
        }
    }

    /// Multiplexed mode: the peer knocked at `now` for `id`, which is not served yet; the knock
    /// is kept until it is (unless the table is full). Expired knocks are forgotten first.
    pub(super) fn knock(&mut self, id: u32, now: Instant) -> Stored {
        let ttl = self.ttl;
        self.knocks
            .retain(|_, at| now.saturating_duration_since(*at) < ttl);
        if self.knocks.len() >= MAX_UNCLAIMED {
            return Stored::Full;
        }
        self.knocks.insert(id, now);
        Stored::Kept
    }

    /// Multiplexed mode: `id` is now served; whether a knock for it arrived within the TTL
    /// (and so must be acknowledged). Forgets the knock either way.
    pub(super) fn take_knock(&mut self, id: u32, now: Instant) -> bool {
        self.knocks
            .remove(&id)
            .is_some_and(|at| now.saturating_duration_since(at) < self.ttl)
    }

    /// Forgets everything; waiting dials see their sender dropped.
    pub(super) fn clear(&mut self) {
        self.slots.clear();
        self.knocks.clear();
    }

    /// How many ids have an entry (arrived or awaited).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether `id` has an entry (arrived or awaited).
    #[cfg(test)]
    pub(super) fn has_entry(&self, id: u32) -> bool {
        self.slots.contains_key(&id)
    }

    /// How many knocks are kept.
    #[cfg(test)]
    pub(super) fn knock_count(&self) -> usize {
        self.knocks.len()
    }

    /// Whether a knock for `id` is kept.
    #[cfg(test)]
    pub(super) fn has_knock(&self, id: u32) -> bool {
        self.knocks.contains_key(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(5);

    fn info(id: u32) -> ConnInfo {
        ConnInfo {
            service_id: id,
            network: "unix".into(),
            address: format!("/tmp/x/{id}.sock"),
            knock: None,
        }
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn ready(claim: Claim) -> ConnInfo {
        match claim {
            Claim::Ready(info) => info,
            Claim::Wait(_) => panic!("the claim has to wait"),
        }
    }

    fn waiting(claim: Claim) -> oneshot::Receiver<ConnInfo> {
        match claim {
            Claim::Wait(rx) => rx,
            Claim::Ready(info) => panic!("the claim got {info:?}"),
        }
    }

    #[test]
    fn a_conn_info_that_arrived_is_claimed_within_its_ttl_and_only_once() {
        let (mut table, t0) = (ConnInfoTable::new(TTL), Instant::now());
        assert_eq!(table.arrive(info(3), t0), Stored::Kept);
        assert_eq!(ready(table.claim(3, t0 + secs(4))).service_id, 3);
        let _second = waiting(table.claim(3, t0 + secs(4)));
    }

    #[test]
    fn an_expired_conn_info_is_not_claimed_the_claim_waits_instead() {
        let (mut table, t0) = (ConnInfoTable::new(TTL), Instant::now());
        table.arrive(info(3), t0);
        let mut rx = waiting(table.claim(3, t0 + secs(5)));
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn every_waiting_claim_gets_the_conn_info_when_it_arrives() {
        let (mut table, t0) = (ConnInfoTable::new(TTL), Instant::now());
        let mut first = waiting(table.claim(7, t0));
        let mut second = waiting(table.claim(7, t0));
        assert_eq!(table.arrive(info(7), t0 + secs(60)), Stored::Delivered);
        assert_eq!(first.try_recv().unwrap().address, "/tmp/x/7.sock");
        assert_eq!(second.try_recv().unwrap().address, "/tmp/x/7.sock");
        assert!(!table.has_entry(7));
    }

    #[test]
    fn abandoned_waits_and_expired_conn_infos_are_forgotten_when_another_arrives() {
        let (mut table, t0) = (ConnInfoTable::new(TTL), Instant::now());
        drop(waiting(table.claim(1, t0)));
        table.arrive(info(2), t0);
        table.arrive(info(100), t0 + secs(6));
        assert_eq!(table.len(), 1);
        assert!(table.has_entry(100));
    }

    #[test]
    fn the_host_services_conn_info_never_expires_and_is_claimed_any_number_of_times() {
        let (mut table, t0) = (ConnInfoTable::new(TTL), Instant::now());
        table.arrive(info(HOST_SERVICES_ID), t0);
        table.arrive(info(1), t0 + secs(3600));
        for _ in 0..3 {
            let claimed = ready(table.claim(HOST_SERVICES_ID, t0 + secs(3600)));
            assert_eq!(claimed.service_id, HOST_SERVICES_ID);
        }
    }

    #[test]
    fn conn_infos_beyond_the_cap_are_dropped() {
        let (mut table, t0) = (ConnInfoTable::new(TTL), Instant::now());
        for id in 0..MAX_UNCLAIMED as u32 {
            assert_eq!(table.arrive(info(id), t0), Stored::Kept);
        }
        assert_eq!(table.arrive(info(5000), t0), Stored::Full);
        assert_eq!(table.len(), MAX_UNCLAIMED);
        // Expired entries make room again.
        assert_eq!(table.arrive(info(5000), t0 + secs(5)), Stored::Kept);
    }

    #[test]
    fn a_knock_is_taken_once_within_its_ttl() {
        let (mut table, t0) = (ConnInfoTable::new(TTL), Instant::now());
        assert_eq!(table.knock(3, t0), Stored::Kept);
        assert!(table.take_knock(3, t0 + secs(4)));
        assert!(!table.take_knock(3, t0 + secs(4)));
    }

    #[test]
    fn an_expired_knock_is_forgotten_without_being_answered() {
        let (mut table, t0) = (ConnInfoTable::new(TTL), Instant::now());
        table.knock(3, t0);
        assert!(!table.take_knock(3, t0 + secs(5)));
        assert!(!table.has_knock(3));
    }

    #[test]
    fn knocks_beyond_the_cap_are_dropped_until_old_ones_expire() {
        let (mut table, t0) = (ConnInfoTable::new(TTL), Instant::now());
        for id in 0..MAX_UNCLAIMED as u32 {
            assert_eq!(table.knock(id, t0), Stored::Kept);
        }
        assert_eq!(table.knock(5000, t0), Stored::Full);
        assert_eq!(table.knock(5000, t0 + secs(5)), Stored::Kept);
        assert!(table.has_knock(5000) && !table.has_knock(0));
    }

    #[test]
    fn clearing_forgets_everything_and_ends_waiting_claims() {
        let (mut table, t0) = (ConnInfoTable::new(TTL), Instant::now());
        let mut rx = waiting(table.claim(1, t0));
        table.arrive(info(2), t0);
        table.knock(3, t0);
        table.clear();
        assert_eq!(
            rx.try_recv(),
            Err(oneshot::error::TryRecvError::Closed),
            "the waiting claim sees the table closed"
        );
        assert_eq!(table.len(), 0);
        assert!(!table.has_knock(3));
    }
}
