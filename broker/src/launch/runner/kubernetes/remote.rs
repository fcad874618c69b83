//! A plugin Pod as the rest of the launch sees it: a [`Remote`] leader whose `SIGTERM` is a
//! deletion with the terminate grace (the kubelet sends the container `SIGTERM`, then `SIGKILL`
//! when the grace is over) and whose `SIGKILL` is a deletion without grace; its exit is
//! reported by [`PodObjects::follow`] once nothing of it is left.

use std::io;
use std::process::ExitStatus;
use std::time::Duration;

use rustix::process::Signal;
use tokio::sync::watch;

use super::life::PodObjects;
use crate::confine::process::Remote;

/// A running plugin Pod.
#[derive(Debug)]
pub(crate) struct PodPlugin {
    objects: PodObjects,
    terminate_grace: Duration,
    exit: watch::Receiver<Option<ExitStatus>>,
    runtime: tokio::runtime::Handle,
}

impl PodPlugin {
    pub(crate) fn new(
        objects: PodObjects,
        terminate_grace: Duration,
        exit: watch::Receiver<Option<ExitStatus>>,
    ) -> Self {
        Self {
            objects,
            terminate_grace,
            exit,
            runtime: tokio::runtime::Handle::current(),
        }
    }
}

impl Remote for PodPlugin {
    fn signal(&self, signal: Signal) -> io::Result<bool> {
        if self.exit.borrow().is_some() {
            return Ok(false);
        }
        let grace = if signal == Signal::KILL {
            Duration::ZERO
        } else {
            self.terminate_grace
        };
        let objects = self.objects.clone();
        self.runtime
            .spawn(async move { objects.delete(grace).await });
        Ok(true)
    }

    fn exit(&self) -> watch::Receiver<Option<ExitStatus>> {
        self.exit.clone()
    }
}
