//! An elapsed-time spinner for long waits, drawn on stderr only when it is a terminal and
//! `--json` is off. Nothing is drawn otherwise.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

/// How often the spinner redraws.
const TICK: Duration = Duration::from_millis(100);

/// A running spinner; dropping or [`Ticker::stop`]ping it erases the line.
#[derive(Debug)]
pub(crate) struct Ticker {
    bar: Option<ProgressBar>,
}

impl Ticker {
    /// Starts redrawing `| {what} ... 3.2s` every 100 ms on stderr, if `enabled`.
    pub(crate) fn start(enabled: bool, what: impl Into<String>) -> Self {
        if !enabled {
            return Self { bar: None };
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        // The template is a constant; a parse error would be a programming error, and
        // then the spinner falls back to indicatif's default style.
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ... {seconds}") {
            bar.set_style(style.tick_chars("|/-\\ ").with_key(
                "seconds",
                |state: &ProgressState, out: &mut dyn std::fmt::Write| {
                    let _ = write!(out, "{:.1}s", state.elapsed().as_secs_f64());
                },
            ));
        }
        bar.set_message(what.into());
        bar.enable_steady_tick(TICK);
        Self { bar: Some(bar) }
    }

    /// Stops the spinner and erases its line.
    pub(crate) fn stop(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop();
    }
}
