//! A real headless Chromium driven through chromedriver (Debian's `chromium`
//! and `chromium-driver`, installed by `scripts/test.sh`), offline.
#![expect(
    clippy::panic,
    reason = "test support: a missing browser fails the test"
)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

/// The browser binary.
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// The WebDriver binary.
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// A running chromedriver and one browser session; the driver is killed on drop.
#[derive(Debug)]
pub struct Browser {
    /// The WebDriver session.
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .unwrap_or_else(|error| panic!("no free port: {error}"))
}

impl Browser {
    /// Starts chromedriver and a headless Chromium at `width` x `height`.
    pub async fn start(width: u32, height: u32) -> Self {
        Self::start_with(width, height, &[]).await
    }

    /// [`Browser::start`] with more Chromium flags, e.g.
    /// `--host-resolver-rules=MAP evil.example 127.0.0.1`.
    pub async fn start_with(width: u32, height: u32, extra_args: &[&str]) -> Self {
        for binary in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                Path::new(binary).exists(),
                "{binary} is missing: run scripts/test.sh (it installs chromium and chromium-driver)"
            );
        }
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start chromedriver: {error}"));
        let profile = tempfile::tempdir().unwrap_or_else(|error| panic!("no temp dir: {error}"));
        let mut args = vec![
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-quic".to_owned(),
            format!("--window-size={width},{height}"),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        args.extend(extra_args.iter().map(|arg| (*arg).to_owned()));
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({"binary": CHROMIUM, "args": args}),
        );
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        let client = loop {
            let attempt =
                ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
                    .capabilities(capabilities.clone())
                    .connect(&url)
                    .await;
            match attempt {
                Ok(client) => break client,
                Err(error) if Instant::now() > deadline => {
                    panic!("chromedriver did not start: {error}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        Self {
            client,
            driver,
            _profile: profile,
        }
    }

    /// Runs `script` in the page and returns its value.
    pub async fn eval(&self, script: &str) -> Value {
        self.client
            .execute(script, vec![])
            .await
            .unwrap_or_else(|error| panic!("script failed: {error}\n{script}"))
    }

    /// Runs axe-core (the npm package `scripts/test.sh` installs) on the page and returns
    /// its WCAG 2.0/2.1 A and AA violations, each as axe reports it (`id`, `help`, `nodes`).
    pub async fn axe_violations(&self) -> Vec<Value> {
        let path = PathBuf::from(crate::runtime_support::npm_dir())
            .join("node_modules/axe-core/axe.min.js");
        let source = std::fs::read_to_string(&path).unwrap_or_else(|error| {
            panic!(
                "axe-core is missing at {} ({error}): run scripts/test.sh",
                path.display()
            )
        });
        // axe.min.js defines `window.axe` when run as a script body.
        self.eval(&format!("{source}\n;return typeof window.axe;"))
            .await;
        let script = "var done = arguments[arguments.length - 1];             window.axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}})               .then(function (r) { done(r.violations); }, function (e) { done(String(e)); });";
        let result = self
            .client
            .execute_async(script, vec![])
            .await
            .unwrap_or_else(|error| panic!("axe failed: {error}"));
        match result {
            Value::Array(violations) => violations,
            other => panic!("axe did not run: {other}"),
        }
    }

    /// Waits until `script` returns `true` (polling the page).
    pub async fn wait_until(&self, what: &str, script: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if self.eval(script).await == Value::Bool(true) {
                return;
            }
            if Instant::now() > deadline {
                panic!("timed out waiting for {what}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends `keys` to the focused element, as a person at the keyboard would.
    pub async fn type_keys(&self, keys: &str) {
        self.client
            .active_element()
            .await
            .unwrap_or_else(|error| panic!("no focused element: {error}"))
            .send_keys(keys)
            .await
            .unwrap_or_else(|error| panic!("cannot type {keys:?}: {error}"));
    }

    /// Presses Tab until `css` has the focus (at most `limit` times); panics otherwise.
    pub async fn tab_to(&self, css: &str, limit: usize) {
        let focused = format!("return document.activeElement === document.querySelector('{css}');");
        for _ in 0..limit {
            if self.eval(&focused).await == Value::Bool(true) {
                return;
            }
            self.type_keys(&char::from(fantoccini::key::Key::Tab).to_string())
                .await;
        }
        let focused = self
            .eval("var e = document.activeElement; return e ? e.outerHTML.slice(0, 200) : null;")
            .await;
        panic!("{css} never got the focus in {limit} presses of Tab (focused: {focused})");
    }

    /// Types `text` into the field named `name` inside `scope` (replacing its value).
    pub async fn fill(&self, scope: &str, name: &str, text: &str) {
        let field = self
            .client
            .find(Locator::Css(&format!("{scope} [name=\"{name}\"]")))
            .await
            .unwrap_or_else(|error| panic!("no field {name}: {error}"));
        field
            .clear()
            .await
            .unwrap_or_else(|error| panic!("cannot clear {name}: {error}"));
        field
            .send_keys(text)
            .await
            .unwrap_or_else(|error| panic!("cannot type into {name}: {error}"));
    }

    /// Clicks the element at `css`.
    pub async fn click(&self, css: &str) {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|error| panic!("no element {css}: {error}"))
            .click()
            .await
            .unwrap_or_else(|error| panic!("cannot click {css}: {error}"));
    }

    /// Writes a PNG screenshot of the page to `path`.
    pub async fn screenshot(&self, path: &Path) {
        let png = self
            .client
            .screenshot()
            .await
            .unwrap_or_else(|error| panic!("no screenshot: {error}"));
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap_or_else(|error| panic!("{error}"));
        }
        std::fs::write(path, png)
            .unwrap_or_else(|error| panic!("cannot write {}: {error}", path.display()));
    }

    /// Screenshots of the page at a desktop width (1280 px) and a phone width (390 px),
    /// written as `NAME-desktop.png` and `NAME-phone.png` into [`screenshot_dir`]; the window
    /// is left at the desktop width.
    pub async fn screenshots_at_widths(&self, name: &str) {
        for (label, width, height) in [("phone", 390, 844), ("desktop", 1280, 900)] {
            self.client
                .set_window_size(width, height)
                .await
                .unwrap_or_else(|error| panic!("cannot resize to {width}: {error}"));
            self.screenshot(&screenshot_dir().join(format!("{name}-{label}.png")))
                .await;
        }
    }

    /// Ends the session and the driver.
    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill().await;
    }
}

/// Where the browser tests write screenshots (`M3_SCREENSHOT_DIR`, default
/// `$CARGO_TARGET_DIR/m3-screenshots` or `target/m3-screenshots`).
pub fn screenshot_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("M3_SCREENSHOT_DIR") {
        return PathBuf::from(dir);
    }
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".to_owned());
    PathBuf::from(target).join("m3-screenshots")
}
