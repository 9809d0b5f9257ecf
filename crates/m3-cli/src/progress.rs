//! An elapsed-time line for long waits, drawn on stderr only when it is a terminal and
//! `--json` is off. Nothing is drawn otherwise.

use std::io::Write;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

/// A running ticker; dropping or [`Ticker::stop`]ping it erases the line.
#[derive(Debug)]
pub(crate) struct Ticker {
    task: Option<JoinHandle<()>>,
}

impl Ticker {
    /// Starts redrawing `  {what} ... 3.2s` every 100 ms, if `enabled`.
    pub(crate) fn start(enabled: bool, what: impl Into<String>) -> Self {
        if !enabled {
            return Self { task: None };
        }
        let what = what.into();
        let started = Instant::now();
        let task = tokio::spawn(async move {
            const FRAMES: [char; 4] = ['|', '/', '-', '\\'];
            let mut frame = 0usize;
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                frame = (frame + 1) % FRAMES.len();
                let mut stderr = std::io::stderr().lock();
                let _ = write!(
                    stderr,
                    "\r{} {what} ... {:.1}s\x1b[K",
                    FRAMES[frame],
                    started.elapsed().as_secs_f64()
                );
                let _ = stderr.flush();
            }
        });
        Self { task: Some(task) }
    }

    /// Stops the ticker and erases its line.
    pub(crate) fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "\r\x1b[K");
            let _ = stderr.flush();
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop();
    }
}
