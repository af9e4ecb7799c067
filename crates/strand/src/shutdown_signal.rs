//! SIGINT/SIGTERM, listened for from the moment the process starts.
//!
//! The handlers are installed once, before anything slow (opening logs, joining the
//! quorum), and kept for the life of the process: a signal that arrives while the broker
//! is still starting is remembered and ends it cleanly once it can, instead of killing it
//! with the default action, and no signal is lost between two waits.

use tokio::signal::unix::{signal, Signal, SignalKind};

pub(crate) struct ShutdownSignal {
    interrupt: Signal,
    terminate: Signal,
}

impl ShutdownSignal {
    /// Installs the handlers; must run inside the Tokio runtime.
    pub(crate) fn install() -> std::io::Result<ShutdownSignal> {
        Ok(ShutdownSignal {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// Resolves at the first SIGINT or SIGTERM received since `install` (or since the
    /// last time this resolved).
    pub(crate) async fn recv(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {},
            _ = self.terminate.recv() => {},
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A SIGTERM that arrives before anyone waits (a broker still opening its logs) is
    /// neither fatal nor lost: the first wait afterwards sees it. Without the handlers
    /// installed up front, the default action would kill this test process.
    #[tokio::test]
    async fn a_signal_before_the_wait_is_kept_for_it() {
        let mut shutdown = ShutdownSignal::install().unwrap();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        tokio::time::timeout(std::time::Duration::from_secs(10), shutdown.recv())
            .await
            .expect("the SIGTERM sent before waiting is received");
    }
}
