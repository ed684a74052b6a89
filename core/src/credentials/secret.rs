//! Secret values: where they come from (`env`, `file`, `value`) and how they are
//! held (`Secret`, never printed).
//!
//! Guarantees: a `Secret`'s Debug and Display are `***`; a missing env var or an
//! unreadable file is a `ConfigError` naming the field, never containing the value;
//! a file is re-read when its modification time changes (checked at most once a second).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::error::HarnessError;

/// A credential. Cheap to clone; prints as `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<str>);

impl Secret {
    pub fn new(value: impl Into<Arc<str>>) -> Self {
        Secret(value.into())
    }

    /// The value itself, for the one place it is sent (a header, a query parameter, a form).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// Where a secret comes from: exactly one of `env`, `file` or `value`.
#[derive(Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct SecretRef {
    pub env: Option<String>,
    pub file: Option<String>,
    /// A literal value (its Debug is redacted; prefer `env` or `file`).
    pub value: Option<String>,
    /// A label for metrics and the state API (key pools), never the value.
    pub name: Option<String>,
}

impl std::fmt::Debug for SecretRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretRef")
            .field("env", &self.env)
            .field("file", &self.file)
            .field("value", &self.value.as_ref().map(|_| "***"))
            .field("name", &self.name)
            .finish()
    }
}

impl SecretRef {
    /// Checks the shape (exactly one source), naming `field`.
    pub fn validate(&self, field: &str) -> Result<(), HarnessError> {
        let n = self.env.is_some() as u8 + self.file.is_some() as u8 + self.value.is_some() as u8;
        if n != 1 {
            return Err(HarnessError::config(format!("{field}: expected exactly one of env, file or value")));
        }
        Ok(())
    }

    /// Reads the secret now.
    pub fn load(&self, field: &str) -> Result<SecretSource, HarnessError> {
        self.validate(field)?;
        if let Some(name) = &self.env {
            return match std::env::var(name) {
                Ok(v) if !v.is_empty() => Ok(SecretSource::Fixed(Secret::new(v))),
                Ok(_) => Err(HarnessError::config(format!("{field}.env: environment variable {name} is empty"))),
                Err(_) => Err(HarnessError::config(format!("{field}.env: environment variable {name} is not set"))),
            };
        }
        if let Some(path) = &self.file {
            let file = FileSecret { path: PathBuf::from(path), field: format!("{field}.file"), state: Mutex::new(None) };
            file.current()?;
            return Ok(SecretSource::File(Arc::new(file)));
        }
        Ok(SecretSource::Fixed(Secret::new(self.value.clone().unwrap_or_default())))
    }
}

/// A loaded secret: fixed, or a file followed for changes.
#[derive(Clone)]
pub enum SecretSource {
    Fixed(Secret),
    File(Arc<FileSecret>),
}

impl std::fmt::Debug for SecretSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretSource(***)")
    }
}

impl SecretSource {
    /// The value in force now (a file's latest content).
    pub fn current(&self) -> Result<Secret, HarnessError> {
        match self {
            SecretSource::Fixed(s) => Ok(s.clone()),
            SecretSource::File(f) => f.current(),
        }
    }
}

/// A secret kept in a file (a mounted Kubernetes secret), re-read when it changes.
pub struct FileSecret {
    path: PathBuf,
    field: String,
    /// (value, the file's mtime when read, when the mtime was last checked)
    state: Mutex<Option<(Secret, Option<SystemTime>, std::time::Instant)>>,
}

/// How often a secret file's modification time is looked at.
const FILE_CHECK: Duration = Duration::from_secs(1);

impl FileSecret {
    pub fn current(&self) -> Result<Secret, HarnessError> {
        let mut state = self.state.lock();
        if let Some((value, _, checked)) = state.as_ref() {
            if checked.elapsed() < FILE_CHECK {
                return Ok(value.clone());
            }
        }
        let mtime = std::fs::metadata(&self.path).and_then(|m| m.modified()).ok();
        if let Some((value, seen, checked)) = state.as_mut() {
            if *seen == mtime && mtime.is_some() {
                *checked = std::time::Instant::now();
                return Ok(value.clone());
            }
        }
        let text = std::fs::read_to_string(&self.path)
            .map_err(|e| HarnessError::config(format!("{}: cannot read {}: {}", self.field, self.path.display(), e.kind())))?;
        let value = text.trim();
        if value.is_empty() {
            return Err(HarnessError::config(format!("{}: {} is empty", self.field, self.path.display())));
        }
        let secret = Secret::new(value);
        *state = Some((secret.clone(), mtime, std::time::Instant::now()));
        Ok(secret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let s = Secret::new("tok-123");
        assert_eq!(format!("{s} {s:?}"), "*** ***");
        let r = SecretRef { value: Some("tok-123".into()), ..Default::default() };
        assert!(!format!("{r:?}").contains("tok-123"));
    }

    #[test]
    fn sources_are_checked_and_missing_ones_named() {
        let both = SecretRef { env: Some("A".into()), value: Some("x".into()), ..Default::default() };
        assert!(both.validate("auth.token").unwrap_err().message.starts_with("auth.token:"));
        let missing = SecretRef { env: Some("HARNESS_TEST_SURELY_UNSET_VAR".into()), ..Default::default() };
        let e = missing.load("services.a.auth.token").unwrap_err();
        assert_eq!(e.message, "services.a.auth.token.env: environment variable HARNESS_TEST_SURELY_UNSET_VAR is not set");
        let nofile = SecretRef { file: Some("/nonexistent/secret".into()), ..Default::default() };
        assert!(nofile.load("f").unwrap_err().message.starts_with("f.file: cannot read /nonexistent/secret"));
    }

    #[test]
    fn a_file_secret_is_reread_when_it_changes() {
        let dir = std::env::temp_dir().join(format!("harness-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        std::fs::write(&path, "one\n").unwrap();
        let src = SecretRef { file: Some(path.display().to_string()), ..Default::default() }.load("t").unwrap();
        assert_eq!(src.current().unwrap().expose(), "one");
        std::fs::write(&path, "two").unwrap();
        // A distinct modification time (a fast rewrite can share the old one's tick).
        let later = SystemTime::now() + Duration::from_secs(10);
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(later).unwrap();
        // Force the next look (the check interval is a second).
        if let SecretSource::File(f) = &src {
            let mut st = f.state.lock();
            let checked = &mut st.as_mut().unwrap().2;
            *checked = std::time::Instant::now() - FILE_CHECK;
        }
        assert_eq!(src.current().unwrap().expose(), "two");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
