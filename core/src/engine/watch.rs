//! Reloads a client's config when its file changes (the `notify` crate).
//!
//! Guarantees: a change is applied within about a second (a short debounce folds
//! an editor's burst of writes into one reload); an invalid edit is rejected with
//! an event and one stderr line saying why, and the old config stays; the watch
//! thread holds only a weak reference, so it never keeps a client alive, and it
//! ends when the client is closed or dropped.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::Duration;

use notify::{RecursiveMode, Watcher as _};

use crate::error::HarnessError;

/// Editors write a file in several steps; wait this long after the last one.
const DEBOUNCE: Duration = Duration::from_millis(100);

pub(crate) struct Watcher {
    _inner: notify::RecommendedWatcher,
}

/// Starts watching `path`: `changed` runs on the watch thread after each (debounced)
/// change, with the file's canonical path, and returns `false` once nobody needs the
/// watch any more (the client is gone), which ends the thread.
pub(crate) fn watch(path: &Path, changed: impl Fn(&Path) -> bool + Send + 'static) -> Result<Watcher, HarnessError> {
    let path = std::fs::canonicalize(path)
        .map_err(|e| HarnessError::config(format!("config file {}: {e}", path.display())))?;
    // The directory, not the file: editors and config managers replace files by rename.
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("/"));
    let (tx, rx) = channel::<()>();
    let target = path.clone();
    let mut inner = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(event) = res {
            if event.paths.iter().any(|p| p == &target || p.file_name() == target.file_name()) {
                let _ = tx.send(());
            }
        }
    })
    .map_err(|e| HarnessError::config(format!("config file {}: cannot watch: {e}", path.display())))?;
    inner
        .watch(&dir, RecursiveMode::NonRecursive)
        .map_err(|e| HarnessError::config(format!("config file {}: cannot watch: {e}", path.display())))?;
    let shown = path.display().to_string();
    std::thread::Builder::new()
        .name("harness-watch".into())
        .spawn(move || {
            // Ends when the watcher (and with it `tx`) is dropped.
            while rx.recv().is_ok() {
                loop {
                    match rx.recv_timeout(DEBOUNCE) {
                        Ok(()) => continue,
                        Err(RecvTimeoutError::Timeout) => break,
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
                if !changed(&path) {
                    return;
                }
            }
        })
        .map_err(|e| HarnessError::config(format!("config file {shown}: cannot start the watch thread: {e}")))?;
    Ok(Watcher { _inner: inner })
}
