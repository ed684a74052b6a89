//! A ledger of side effects, for the soak's "no POST executes twice" check.
//!
//! `POST /ledger/...` is an operation with a side effect. Its id is the `Idempotency-Key`
//! header when sent (a repeat of a key is answered from the first execution, as an idempotent
//! receiver would, and counted as a replay), else the `x-op-id` header (every arrival
//! executes: a client that resent one would show as a duplicate). `GET /__admin/ledger`
//! returns `{"ops", "executions", "duplicates", "replays"}`; `POST /__admin/ledger/reset` clears it.

use std::collections::HashMap;

use parking_lot::Mutex;
use serde_json::{json, Value};

#[derive(Default)]
pub struct Ledger {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    executed: HashMap<String, u32>,
    executions: u64,
    replays: u64,
}

impl Ledger {
    /// Records one arrival; `Err` when it names no operation.
    pub fn arrive(&self, key: Option<&str>, op: Option<&str>) -> Result<Value, &'static str> {
        let mut l = self.inner.lock();
        if let Some(k) = key {
            let id = format!("key:{k}");
            if l.executed.contains_key(&id) {
                l.replays += 1;
                return Ok(json!({"op": k, "replayed": true}));
            }
            l.executed.insert(id, 1);
            l.executions += 1;
            return Ok(json!({"op": k}));
        }
        let op = op.ok_or("a ledger operation needs an Idempotency-Key or x-op-id header")?;
        *l.executed.entry(format!("op:{op}")).or_default() += 1;
        l.executions += 1;
        Ok(json!({"op": op}))
    }

    pub fn summary(&self) -> Value {
        let l = self.inner.lock();
        let duplicates = l.executed.values().filter(|n| **n > 1).count();
        json!({"ops": l.executed.len(), "executions": l.executions, "duplicates": duplicates, "replays": l.replays})
    }

    pub fn reset(&self) {
        *self.inner.lock() = Inner::default();
    }
}
