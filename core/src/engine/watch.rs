//! Reloads a client's config when its file changes (the `notify` crate).
//!
//! Guarantees: a change is applied within about a second (a short debounce folds
//! an editor's burst of writes into one reload); an invalid edit is rejected with
//! an event and one stderr line saying why, and the old config stays; the watch
//! thread holds only a weak reference, so it never keeps a client alive, and it
//! ends when the client is closed or dropped.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::sync::{Arc, Weak};
use std::time::Duration;

use notify::{RecursiveMode, Watcher as _};

use super::Engine;
use crate::config::Config;
use crate::error::HarnessError;

/// Editors write a file in several steps; wait this long after the last one.
const DEBOUNCE: Duration = Duration::from_millis(100);

pub(crate) struct Watcher {
    _inner: notify::RecommendedWatcher,
}

/// Starts watching `path` for `engine`.
pub(crate) fn watch(engine: &Arc<Engine>, path: &Path) -> Result<Watcher, HarnessError> {
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
    let weak: Weak<Engine> = Arc::downgrade(engine);
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
                let Some(engine) = weak.upgrade() else { return };
                let source = format!("file:{}", path.display());
                if let Err(e) = engine.reload(Config::from_path(&path), &source) {
                    let line = serde_json::json!({
                        "event": "harness.config_rejected",
                        "source": source,
                        "error": e.to_string(),
                        "note": "the previous config stays in force",
                    });
                    let _ = writeln!(std::io::stderr(), "{line}");
                }
            }
        })
        .map_err(|e| HarnessError::config(format!("config file {shown}: cannot start the watch thread: {e}")))?;
    Ok(Watcher { _inner: inner })
}
