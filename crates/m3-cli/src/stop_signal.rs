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
    streams: Vec<(StopSignal, tokio::signal::unix::Signal)>,
}

impl StopSignals {
    /// Installs handlers for Ctrl-C and SIGTERM (a long-running service: SIGHUP keeps its
    /// usual meaning, so `nohup` still protects it).
    ///
    /// # Errors
    /// `io_error` when the operating system refuses a handler.
    pub(crate) fn service() -> Result<Self, Failure> {
        Self::install(&[StopSignal::Interrupt, StopSignal::Terminate])
    }

    /// Installs handlers for Ctrl-C, SIGTERM and SIGHUP (a foreground run, which must not
    /// die with its terminal while its round takes answers).
    ///
    /// # Errors
    /// `io_error` when the operating system refuses a handler.
    pub(crate) fn foreground() -> Result<Self, Failure> {
        Self::install(&[
            StopSignal::Interrupt,
            StopSignal::Terminate,
            StopSignal::HangUp,
        ])
    }

    #[cfg(unix)]
    fn install(which: &[StopSignal]) -> Result<Self, Failure> {
        use tokio::signal::unix::{SignalKind, signal};
        let streams = which
            .iter()
            .map(|&stop| {
                let kind = match stop {
                    StopSignal::Interrupt => SignalKind::interrupt(),
                    StopSignal::Terminate => SignalKind::terminate(),
                    StopSignal::HangUp => SignalKind::hangup(),
                };
                let stream = signal(kind).map_err(|e| {
                    Failure::new("io_error", format!("cannot handle {}: {e}", stop.name()))
                })?;
                Ok((stop, stream))
            })
            .collect::<Result<_, Failure>>()?;
        Ok(Self { streams })
    }

    #[cfg(not(unix))]
    fn install(_which: &[StopSignal]) -> Result<Self, Failure> {
        Ok(Self {})
    }

    /// The next stop signal.
    #[cfg(unix)]
    pub(crate) async fn next(&mut self) -> StopSignal {
        std::future::poll_fn(|cx| {
            for (stop, stream) in &mut self.streams {
                if stream.poll_recv(cx).is_ready() {
                    return std::task::Poll::Ready(*stop);
                }
            }
            std::task::Poll::Pending
        })
        .await
    }

    /// The next stop signal.
    #[cfg(not(unix))]
    pub(crate) async fn next(&mut self) -> StopSignal {
        let _ = tokio::signal::ctrl_c().await;
        StopSignal::Interrupt
    }
}
