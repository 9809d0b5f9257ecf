//! The signals that stop an `m3` process: Ctrl-C (SIGINT), SIGTERM (a service manager, a
//! container runtime, a CI timeout) and SIGHUP (a closed terminal or SSH session). Every
//! long-running command stops on the first two; `m3 run` also on the third, and tells them
//! apart only for its exit status (128 + the signal's number, as shells report it).

use crate::failure::Failure;

/// Which signal asked the process to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopSignal {
    /// Ctrl-C.
    Interrupt,
    /// SIGTERM.
    Terminate,
    /// SIGHUP.
    HangUp,
}

impl StopSignal {
    /// The name people know it by.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Interrupt => "Ctrl-C",
            Self::Terminate => "SIGTERM",
            Self::HangUp => "SIGHUP",
        }
    }

    /// The failure a foreground run ends with after this signal stopped it: its code gives
    /// the exit status 128 + the signal's number (130, 143, 129).
    pub(crate) fn failure(self, execution_id: &str) -> Failure {
        match self {
            Self::Interrupt => Failure::interrupted(execution_id),
            Self::Terminate => Failure::stopped_by("terminated", self.name(), execution_id),
            Self::HangUp => Failure::stopped_by("hung_up", self.name(), execution_id),
        }
    }
}

/// The stop signals as a stream: each [`StopSignals::next`] waits for the next one. The
/// handlers are installed once, up front, so a signal that arrives while the process is
/// busy elsewhere is kept, not lost (and never kills the process).
#[derive(Debug)]
pub(crate) struct StopSignals {
    #[cfg(unix)]
    streams: [(StopSignal, tokio::signal::unix::Signal); 3],
}

impl StopSignals {
    /// Installs the handlers.
    ///
    /// # Errors
    /// `io_error` when the operating system refuses a handler.
    #[cfg(unix)]
    pub(crate) fn install() -> Result<Self, Failure> {
        use tokio::signal::unix::{SignalKind, signal};
        let install = |kind: SignalKind| {
            signal(kind)
                .map_err(|e| Failure::new("io_error", format!("cannot handle a stop signal: {e}")))
        };
        Ok(Self {
            streams: [
                (StopSignal::Interrupt, install(SignalKind::interrupt())?),
                (StopSignal::Terminate, install(SignalKind::terminate())?),
                (StopSignal::HangUp, install(SignalKind::hangup())?),
            ],
        })
    }

    /// Installs the handler (Ctrl-C only off Unix).
    ///
    /// # Errors
    /// Never off Unix.
    #[cfg(not(unix))]
    pub(crate) fn install() -> Result<Self, Failure> {
        Ok(Self {})
    }

    /// The next stop signal.
    #[cfg(unix)]
    pub(crate) async fn next(&mut self) -> StopSignal {
        let [(a, first), (b, second), (c, third)] = &mut self.streams;
        tokio::select! {
            _ = first.recv() => *a,
            _ = second.recv() => *b,
            _ = third.recv() => *c,
        }
    }

    /// The next stop signal.
    #[cfg(not(unix))]
    pub(crate) async fn next(&mut self) -> StopSignal {
        let _ = tokio::signal::ctrl_c().await;
        StopSignal::Interrupt
    }
}
