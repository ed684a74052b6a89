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
#[derive(Clone, Default, Deserialize, Serialize, PartialEq, Eq, schemars::JsonSchema)]
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
                Ok(v) if !v.is_empty() => {
                    check_text(&format!("{field}.env"), &v)?;
                    Ok(SecretSource::Fixed(Secret::new(v)))
                }
                Ok(_) => Err(HarnessError::config(format!("{field}.env: environment variable {name} is empty"))),
                Err(_) => Err(HarnessError::config(format!("{field}.env: environment variable {name} is not set"))),
            };
        }
        if let Some(path) = &self.file {
            let file = FileSecret { path: PathBuf::from(path), field: format!("{field}.file"), state: Mutex::new(None) };
            file.current()?;
            return Ok(SecretSource::File(Arc::new(file)));
        }
        let value = self.value.clone().unwrap_or_default();
        check_text(&format!("{field}.value"), &value)?;
        Ok(SecretSource::Fixed(Secret::new(value)))
    }
}

/// A secret is sent in a header or a query: a control character (CR, LF, NUL...) would break
/// every request, so it is refused when loaded, naming the field and never the value.
fn check_text(field: &str, value: &str) -> Result<(), HarnessError> {
    if value.is_empty() {
        return Err(HarnessError::config(format!("{field}: the secret is empty")));
    }
    if value.chars().any(char::is_control) {
        return Err(HarnessError::config(format!(
            "{field}: the secret contains a control character (CR, LF, NUL, TAB...): it cannot be sent in a header"
        )));
    }
    Ok(())
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
        let text = crate::config::files::read_text(&self.path, &self.field)?;
        let value = text.trim();
        if value.is_empty() {
            return Err(HarnessError::config(format!("{}: {} is empty", self.field, self.path.display())));
        }
        check_text(&self.field, value)?;
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
        let e = nofile.load("f").unwrap_err();
        assert!(e.message.starts_with("f.file: \"/nonexistent/secret\" cannot be read"), "{}", e.message);
    }

    #[test]
    fn a_secret_with_a_control_character_is_refused_naming_the_field_not_the_value() {
        for bad in ["tok\r\nX-Injected: 1", "tok\0", "tok\nen"] {
            let r = SecretRef { value: Some(bad.into()), ..Default::default() };
            let e = r.load("services.a.auth.token").unwrap_err();
            assert!(e.message.starts_with("services.a.auth.token.value: the secret contains a control character"), "{}", e.message);
            assert!(!e.message.contains(bad) && !e.message.contains("Injected"), "{}", e.message);
        }
        let dev = SecretRef { file: Some("/dev/zero".into()), ..Default::default() };
        assert!(dev.load("t").unwrap_err().message.contains("not a regular file"));
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
