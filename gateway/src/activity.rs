//! What the admin console shows that no metric answers directly: each caller's day (requests,
//! errors, rate-limit and budget refusals), each provider's cost today, the reloads tried and
//! the admin actions taken.
//!
//! Guarantees: bounded memory (the caller and provider maps are keyed by configured names
//! only, the reload history and the audit trail keep their last `HISTORY` entries); a day is
//! the UTC day, and counters start again at zero when it turns; nothing here is on a request's
//! critical path beyond one short lock.

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;
use serde::Serialize;
use serde_json::Value;

/// How many reloads and admin actions are kept.
pub(crate) const HISTORY: usize = 100;

fn today() -> u64 {
    now_ms() / 86_400_000
}

pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// One caller's counts for today.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub(crate) struct CallerDay {
    #[serde(skip)]
    day: u64,
    pub requests: u64,
    /// Answers with a status of 400 or more (refusals included).
    pub errors: u64,
    /// Refused by the caller's own rate limit.
    pub rate_limited: u64,
    /// Refused because the caller's budget for today was spent.
    pub budget_refused: u64,
}

impl CallerDay {
    fn roll(&mut self, day: u64) {
        if self.day != day {
            *self = CallerDay { day, ..CallerDay::default() };
        }
    }
}

/// Why a caller was refused before anything was forwarded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    RateLimited,
    Budget,
}

/// A reload tried through the admin API (a body, the file, or a weight set by hand).
#[derive(Clone, Debug, Serialize)]
pub(crate) struct ReloadRecord {
    pub at_ms: u64,
    /// `admin_reload`, `set_weight`.
    pub source: String,
    pub principal: String,
    pub accepted: bool,
    /// The version in force afterwards (the new one, or the old one kept).
    pub version: String,
    pub error: Option<String>,
    /// The config field a rejected version named (`services.orders.base_url`).
    pub field_path: Option<String>,
}

/// An admin action, as it is written to the log and kept for `/admin/audit`.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct AuditRecord {
    pub at_ms: u64,
    pub principal: String,
    pub action: String,
    /// What it acted on (`chat/a`, `orders GET /x`).
    pub target: String,
    pub ok: bool,
    /// The weight set, the error, the test's status: whatever says how it went.
    pub detail: Value,
}

#[derive(Default)]
pub(crate) struct Activity {
    callers: Mutex<HashMap<String, CallerDay>>,
    /// (route, provider) -> (day, cost).
    provider_cost: Mutex<HashMap<(String, String), (u64, f64)>>,
    reloads: Mutex<VecDeque<ReloadRecord>>,
    audit: Mutex<VecDeque<AuditRecord>>,
}

fn push_bounded<T>(q: &mut VecDeque<T>, item: T) {
    if q.len() == HISTORY {
        q.pop_front();
    }
    q.push_back(item);
}

impl Activity {
    /// One answered request of a known caller.
    pub fn request(&self, caller: &str, status: u16) {
        let day = today();
        let mut callers = self.callers.lock();
        let c = callers.entry(caller.to_string()).or_default();
        c.roll(day);
        c.requests += 1;
        if status >= 400 {
            c.errors += 1;
        }
    }

    pub fn refused(&self, caller: &str, why: Refusal) {
        let day = today();
        let mut callers = self.callers.lock();
        let c = callers.entry(caller.to_string()).or_default();
        c.roll(day);
        match why {
            Refusal::RateLimited => c.rate_limited += 1,
            Refusal::Budget => c.budget_refused += 1,
        }
    }

    /// Today's counts of `caller` (zeros for one not seen today).
    pub fn caller_day(&self, caller: &str) -> CallerDay {
        let day = today();
        let mut c = self.callers.lock().get(caller).cloned().unwrap_or_default();
        c.roll(day);
        c
    }

    /// What an answer of `provider` on `route` was charged.
    pub fn charge(&self, route: &str, provider: Option<&str>, cost: f64) {
        let Some(provider) = provider else { return };
        if !(cost.is_finite() && cost > 0.0) {
            return;
        }
        let day = today();
        let mut costs = self.provider_cost.lock();
        let e = costs.entry((route.to_string(), provider.to_string())).or_insert((day, 0.0));
        if e.0 != day {
            *e = (day, 0.0);
        }
        e.1 += cost;
    }

    pub fn provider_cost_today(&self, route: &str, provider: &str) -> f64 {
        let day = today();
        self.provider_cost.lock().get(&(route.to_string(), provider.to_string())).filter(|(d, _)| *d == day).map(|(_, c)| *c).unwrap_or(0.0)
    }

    /// Forgets callers and providers no longer configured (after a reload), so the maps stay
    /// bounded by the config.
    pub fn retain(&self, callers: &[String], providers: &[(String, String)]) {
        self.callers.lock().retain(|name, _| callers.contains(name));
        self.provider_cost.lock().retain(|key, _| providers.contains(key));
    }

    pub fn reloaded(&self, record: ReloadRecord) {
        push_bounded(&mut self.reloads.lock(), record);
    }

    /// The reloads tried, newest first.
    pub fn reloads(&self) -> Vec<ReloadRecord> {
        self.reloads.lock().iter().rev().cloned().collect()
    }

    /// Keeps `record` and writes it as one JSON line (`harness.admin_action`) to stderr, beside
    /// the access log.
    pub fn audit(&self, record: AuditRecord) {
        use std::io::Write;
        let mut line = serde_json::json!({"event": "harness.admin_action", "principal": record.principal, "action": record.action,
            "target": record.target, "ok": record.ok, "detail": record.detail})
        .to_string();
        line.push('\n');
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
        push_bounded(&mut self.audit.lock(), record);
    }

    /// The admin actions taken, newest first.
    pub fn audit_trail(&self) -> Vec<AuditRecord> {
        self.audit.lock().iter().rev().cloned().collect()
    }
}

/// The field a config error names: the text before its first `: ` when that is a path
/// (`routes.chat.providers[0].weight`), else nothing.
pub(crate) fn field_path(message: &str) -> Option<String> {
    let (head, _) = message.split_once(": ")?;
    let is_path = !head.is_empty() && head.len() <= 512 && head.chars().all(|c| c.is_alphanumeric() || "._-[]{}*/".contains(c)) && head.contains(|c: char| c.is_alphanumeric());
    is_path.then(|| head.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_callers_day_counts_requests_errors_and_refusals() {
        let a = Activity::default();
        a.request("ann", 200);
        a.request("ann", 503);
        a.request("ann", 429);
        a.refused("ann", Refusal::RateLimited);
        a.refused("ann", Refusal::Budget);
        let d = a.caller_day("ann");
        assert_eq!((d.requests, d.errors, d.rate_limited, d.budget_refused), (3, 2, 1, 1));
        assert_eq!(a.caller_day("nobody"), CallerDay { day: today(), ..CallerDay::default() });
    }

    #[test]
    fn a_new_day_starts_every_count_again() {
        let a = Activity::default();
        a.request("ann", 500);
        a.callers.lock().get_mut("ann").unwrap().day -= 1;
        a.provider_cost.lock().insert(("chat".into(), "a".into()), (today() - 1, 9.0));
        assert_eq!(a.caller_day("ann").requests, 0);
        assert_eq!(a.provider_cost_today("chat", "a"), 0.0);
        a.charge("chat", Some("a"), 0.5);
        assert_eq!(a.provider_cost_today("chat", "a"), 0.5, "yesterday's 9.0 is gone");
    }

    #[test]
    fn charges_without_a_provider_or_a_finite_positive_cost_are_ignored() {
        let a = Activity::default();
        a.charge("chat", None, 1.0);
        a.charge("chat", Some("a"), f64::NAN);
        a.charge("chat", Some("a"), -1.0);
        a.charge("chat", Some("a"), 0.25);
        a.charge("chat", Some("a"), 0.25);
        assert_eq!(a.provider_cost_today("chat", "a"), 0.5);
    }

    #[test]
    fn history_and_audit_keep_the_newest_entries_first_and_bounded() {
        let a = Activity::default();
        for i in 0..(HISTORY + 5) {
            a.reloaded(ReloadRecord { at_ms: i as u64, source: "admin_reload".into(), principal: "admin".into(), accepted: true, version: i.to_string(), error: None, field_path: None });
        }
        let r = a.reloads();
        assert_eq!((r.len(), r[0].at_ms, r[HISTORY - 1].at_ms), (HISTORY, (HISTORY + 4) as u64, 5));
    }

    #[test]
    fn retain_forgets_what_the_config_no_longer_names() {
        let a = Activity::default();
        a.request("gone", 200);
        a.request("ann", 200);
        a.charge("chat", Some("old"), 1.0);
        a.retain(&["ann".into()], &[("chat".into(), "a".into())]);
        assert_eq!(a.callers.lock().len(), 1);
        assert!(a.provider_cost.lock().is_empty());
    }

    #[test]
    fn the_field_path_is_read_from_a_config_error() {
        for (message, want) in [
            ("services.orders.base_url: expected http or https", Some("services.orders.base_url")),
            ("routes.chat.providers[0].weight: expected an integer", Some("routes.chat.providers[0].weight")),
            ("the config must be UTF-8 text", None),
            ("config: cannot parse yaml: mapping values", Some("config")),
            ("<img src=x onerror=alert(1)>: x", None),
            (": nothing", None),
        ] {
            assert_eq!(field_path(message).as_deref(), want, "{message}");
        }
    }
}
