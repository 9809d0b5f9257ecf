//! A small real filesystem to fill: a tmpfs mounted for one test.
//!
//! Tests that need a full disk mount a 2 MB tmpfs (they run as root in CI: `scripts/test.sh`),
//! fill it with a filler file until the kernel answers `ENOSPC`, and free it again. Mounting
//! is never skipped: a machine where it is impossible fails the test, loudly.
#![expect(
    clippy::panic,
    clippy::expect_used,
    reason = "test support: a disk that cannot be mounted or filled fails the test"
)]

use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

/// A tmpfs of a fixed size mounted on a fresh temporary directory; unmounted on drop (also
/// when the test panics).
#[derive(Debug)]
pub struct SmallDisk {
    mount_point: TempDir,
}

impl SmallDisk {
    /// Mounts a tmpfs of `size` (`mount -o size=...`, e.g. `2m`).
    ///
    /// # Panics
    /// If the mount fails (not root, no tmpfs): the test fails rather than skips.
    pub fn mount(size: &str) -> Self {
        let mount_point = tempfile::tempdir().expect("a temporary mount point");
        let status = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(mount_point.path())
            .status()
            .expect("`mount` runs");
        assert!(
            status.success(),
            "cannot mount a {size} tmpfs on {} (these tests need root: run them as scripts/test.sh does): {status}",
            mount_point.path().display()
        );
        Self { mount_point }
    }

    /// The mounted directory.
    pub fn path(&self) -> &Path {
        self.mount_point.path()
    }

    fn filler(&self) -> PathBuf {
        self.path().join("filler")
    }

    /// Fills every free byte with a filler file (written until `ENOSPC`).
    ///
    /// # Panics
    /// If writing fails for another reason.
    pub fn fill(&self) {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.filler())
            .expect("the filler file opens");
        // Big writes first, then single bytes, so the last partial block is taken too.
        for chunk in [64 * 1024, 4096, 1] {
            let buffer = vec![0_u8; chunk];
            loop {
                match file.write(&buffer) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(error) if error.kind() == ErrorKind::StorageFull => break,
                    Err(error) => panic!("filling the tmpfs: {error}"),
                }
            }
        }
    }

    /// Removes the filler file: the space is back.
    ///
    /// # Panics
    /// If the filler cannot be removed.
    pub fn free(&self) {
        std::fs::remove_file(self.filler()).expect("the filler file is removed");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(self.path())
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            // Something (a process the test left behind) still uses it: detach it lazily,
            // so the temporary directory can go and nothing stays mounted.
            let _ = Command::new("umount").arg("-l").arg(self.path()).status();
        }
    }
}
