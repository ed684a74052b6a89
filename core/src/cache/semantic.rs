//! The semantic answer cache's index: answers stored under the embedding of the prompt that
//! produced them, found again through the nearest stored prompt of the same scope.
//!
//! Guarantees: a lookup returns only a live (unexpired) entry of exactly the route, scope and
//! vector dimension it names, whose cosine similarity is at least the threshold; it is the most
//! similar such entry, exactly in a scope of fewer than `GRAPH_AT` entries and approximately
//! (HNSW) in a larger one. After every insert `len() <= max_entries` and `bytes() <= max_bytes`:
//! expired entries go first, then the least recently used (a hit is a use). Vectors that are
//! empty, all zero, or hold NaN or infinity are refused; no input panics.
//!
//! A graph cannot delete, so a removed entry stays in it as a tombstone that results skip, and
//! the graph is rebuilt from its live entries once more than half of it is dead: a scope's
//! memory stays within about twice its live entries, and `bytes()` counts the dead until then.

use std::collections::{BTreeMap, BTreeSet};
use std::mem::size_of;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use bytes::Bytes;
use hashbrown::HashMap;
use hnsw_rs::anndists::dist::Distance;
use hnsw_rs::hnsw::Hnsw;
use parking_lot::RwLock;
use tokio::time::Instant;

/// Entries a scope holds before its exact scan becomes a graph.
const GRAPH_AT: usize = 256;
/// A graph rebuilt with fewer live entries than this goes back to an exact scan.
const FLAT_BELOW: usize = GRAPH_AT / 2;
/// Links per node above the bottom layer (HNSW's M); hnsw_rs keeps twice as many on it.
const M: usize = 16;
/// Layers a graph may grow (hnsw_rs's most); a node reaches layer `l` with odds `M^-l`.
const LAYERS: usize = 16;
/// Candidate pool while inserting (efConstruction).
const EF_CONSTRUCTION: usize = 100;
/// Candidate pool of a lookup; the best `NEIGHBOURS` are read, since dead entries are skipped.
const EF_SEARCH: usize = 64;
const NEIGHBOURS: usize = 16;
/// An insert at least this similar to a live entry of its scope replaces it (the same prompt).
const SAME: f32 = 0.999_999;
/// A graph node whose entry was removed.
const DEAD: u64 = 0;

/// Bookkeeping per entry besides its answer and vector: the entry in the key map (a hash table
/// is 7/16 to 7/8 full), its place in the LRU queue and in the expiry order (B-tree nodes are
/// half to fully used).
const ENTRY_OVERHEAD: usize =
    2 * size_of::<(u64, Entry)>() + 2 * size_of::<(u64, u64)>() + 2 * size_of::<(Instant, u64)>();
/// A scope's slot in its route's map, and a route's in the index (plus its name).
const SCOPE_OVERHEAD: usize = 2 * size_of::<(ScopeKey, Scope)>();
const ROUTE_OVERHEAD: usize = 2 * size_of::<(Arc<str>, HashMap<ScopeKey, Scope>)>() + 16;
/// What hnsw_rs holds per node besides its vector, measured (harness-semantic-bench's RSS at
/// 100k entries, M = 16): the point and its per-layer neighbour lists (one list per possible
/// layer), up to 2M links on the bottom layer each a shared (point, distance) pair, and its
/// place in the layer tables.
const GRAPH_NODE: usize = 2_900;

/// A stored answer found by [`SemanticIndex::lookup`].
#[derive(Debug, Clone)]
pub struct SemanticHit {
    pub answer: Bytes,
    /// Cosine similarity of the query to the stored prompt, in [-1, 1].
    pub similarity: f32,
    /// The entry's key, as [`SemanticIndex::insert`] returned it.
    pub key: u64,
}

/// An in-process index of answers by prompt embedding, bounded in entries and bytes.
/// `Send + Sync`: lookups share a read lock; inserts and clears take the write lock.
pub struct SemanticIndex {
    inner: RwLock<Inner>,
    /// The use clock of the LRU order; hits advance it under the read lock.
    ticks: AtomicU64,
    max_entries: usize,
    max_bytes: usize,
}

impl SemanticIndex {
    /// An empty index that holds at most `max_entries` entries and `max_bytes` bytes (as
    /// [`SemanticIndex::bytes`] counts them).
    pub fn new(max_entries: usize, max_bytes: usize) -> SemanticIndex {
        SemanticIndex { inner: RwLock::new(Inner::default()), ticks: AtomicU64::new(0), max_entries, max_bytes }
    }

    /// Stores `answer` under `route` and `scope` for `vector` until `expires` (tokio's clock, so
    /// a paused test clock applies). The vector is normalised; its dimension is part of the
    /// scope. A live entry of the scope with the same vector (similarity >= 0.999999) is
    /// replaced. Returns the new entry's key, after evicting expired, then least recently used
    /// entries until both caps hold; `None` (and nothing stored) for a refused vector, an
    /// `expires` already past, or an entry that cannot fit within the caps on its own.
    pub fn insert(&self, route: &str, scope: u64, vector: &[f32], answer: Bytes, expires: Instant) -> Option<u64> {
        let vector = normalised(vector)?;
        let dim = vector.0.len();
        let now = Instant::now();
        let alone = ENTRY_OVERHEAD + answer.len() + ROUTE_OVERHEAD + route.len() + SCOPE_OVERHEAD + flat_alone(dim);
        if expires <= now || self.max_entries == 0 || alone > self.max_bytes {
            return None;
        }
        let mut guard = self.inner.write();
        let inner = &mut *guard;
        inner.purge_expired(now);
        let at = ScopeKey { scope, dim };
        let twin = inner.routes.get(route).and_then(|scopes| scopes.get(&at)).and_then(|s| s.nearest(dim, &vector, |_| true));
        if let Some((twin, _)) = twin.filter(|&(_, similarity)| similarity >= SAME) {
            inner.remove(twin);
        }
        let route = match inner.routes.get_key_value(route) {
            Some((name, _)) => name.clone(),
            None => {
                let name: Arc<str> = Arc::from(route);
                inner.routes.insert(name.clone(), HashMap::new());
                inner.bytes += ROUTE_OVERHEAD + name.len();
                name
            }
        };
        inner.next_key += 1;
        let key = inner.next_key;
        // Taken under the write lock, so it is newer than every hit's tick.
        let tick = self.ticks.fetch_add(1, Relaxed) + 1;
        inner.bytes += ENTRY_OVERHEAD + answer.len();
        inner.lru.insert(tick, key);
        inner.expiry.insert((expires, key));
        let entry = Entry { answer, route: route.clone(), scope: at, slot: 0, expires, used: AtomicU64::new(tick), queued: tick };
        inner.entries.insert(key, entry);
        let scopes = inner.routes.entry(route).or_default();
        let before = scopes.get(&at).map_or(0, |scope| scope.bytes(dim));
        let scope = scopes.entry(at).or_insert_with(Scope::empty);
        scope.add(dim, key, vector, &mut inner.entries);
        inner.bytes = inner.bytes + scope.bytes(dim) - before;
        while inner.entries.len() > self.max_entries || inner.bytes > self.max_bytes {
            if !inner.evict_lru(key) {
                inner.remove(key);
                return None;
            }
        }
        Some(key)
    }

    /// The most similar live entry stored under exactly `route`, `scope` and `vector`'s
    /// dimension, if its cosine similarity is at least `threshold`; a hit counts as a use.
    /// A threshold above 1 or NaN never hits; one at or below -1 takes the nearest entry.
    pub fn lookup(&self, route: &str, scope: u64, vector: &[f32], threshold: f32) -> Option<SemanticHit> {
        if threshold.is_nan() || threshold > 1.0 {
            return None;
        }
        let query = normalised(vector)?;
        let dim = query.0.len();
        let inner = self.inner.read();
        let now = Instant::now();
        let alive = |key| inner.entries.get(&key).is_some_and(|e| e.expires > now);
        let (key, similarity) = inner.routes.get(route)?.get(&ScopeKey { scope, dim })?.nearest(dim, &query, alive)?;
        let similarity = similarity.clamp(-1.0, 1.0);
        if similarity < threshold {
            return None;
        }
        let entry = inner.entries.get(&key)?;
        entry.used.fetch_max(self.ticks.fetch_add(1, Relaxed) + 1, Relaxed);
        Some(SemanticHit { answer: entry.answer.clone(), similarity, key })
    }

    /// Removes every entry of `route`; returns how many.
    pub fn clear_route(&self, route: &str) -> usize {
        let mut guard = self.inner.write();
        let inner = &mut *guard;
        let Some((name, scopes)) = inner.routes.remove_entry(route) else { return 0 };
        let mut removed = 0;
        for (at, scope) in &scopes {
            for key in scope.keys() {
                if let Some(e) = inner.entries.remove(&key) {
                    inner.lru.remove(&e.queued);
                    inner.expiry.remove(&(e.expires, key));
                    inner.bytes -= ENTRY_OVERHEAD + e.answer.len();
                    removed += 1;
                }
            }
            inner.bytes -= scope.bytes(at.dim);
        }
        inner.bytes -= ROUTE_OVERHEAD + name.len();
        removed
    }

    /// Removes every entry; returns how many.
    pub fn clear(&self) -> usize {
        std::mem::take(&mut *self.inner.write()).entries.len()
    }

    /// Entries held, expired ones included until an insert purges them.
    pub fn len(&self) -> usize {
        self.inner.read().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An estimate of the memory held: answers, vectors (dead graph nodes included), graph
    /// links and per-entry bookkeeping, with the slack of growing tables. Answers count by
    /// length: a `Bytes` that is a slice of a larger buffer keeps that buffer alive.
    pub fn bytes(&self) -> usize {
        self.inner.read().bytes
    }
}

#[derive(Default)]
struct Inner {
    entries: HashMap<u64, Entry>,
    routes: HashMap<Arc<str>, HashMap<ScopeKey, Scope>>,
    /// Entry keys by the tick they were queued under, oldest first; a hit does not move its
    /// entry here (it only advances `Entry::used`), eviction requeues it when reached.
    lru: BTreeMap<u64, u64>,
    expiry: BTreeSet<(Instant, u64)>,
    bytes: usize,
    /// The last key handed out; keys start at 1, so `DEAD` is never one.
    next_key: u64,
}

struct Entry {
    answer: Bytes,
    route: Arc<str>,
    scope: ScopeKey,
    /// The entry's row in its scope's scan, or its node in its scope's graph.
    slot: usize,
    expires: Instant,
    /// The tick of its last use.
    used: AtomicU64,
    /// The tick it sits under in `Inner::lru`, at most `used`.
    queued: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct ScopeKey {
    scope: u64,
    dim: usize,
}

impl Inner {
    /// Removes an entry from every structure that holds it; false if there was none.
    fn remove(&mut self, key: u64) -> bool {
        let Some(e) = self.entries.remove(&key) else { return false };
        self.lru.remove(&e.queued);
        self.expiry.remove(&(e.expires, key));
        self.bytes -= ENTRY_OVERHEAD + e.answer.len();
        let Some(scopes) = self.routes.get_mut(&*e.route) else { return true };
        if let Some(scope) = scopes.get_mut(&e.scope) {
            let before = scope.bytes(e.scope.dim);
            scope.remove(e.scope.dim, e.slot, &mut self.entries);
            let after = scope.bytes(e.scope.dim);
            self.bytes = self.bytes - before + after;
            if scope.live() == 0 {
                scopes.remove(&e.scope);
                self.bytes -= after;
            }
        }
        if scopes.is_empty() {
            self.routes.remove(&*e.route);
            self.bytes -= ROUTE_OVERHEAD + e.route.len();
        }
        true
    }

    /// Evicts the least recently used entry other than `keep`; false if there is none.
    fn evict_lru(&mut self, keep: u64) -> bool {
        while let Some((tick, key)) = self.lru.pop_first() {
            let Some(e) = self.entries.get_mut(&key) else { continue };
            let used = e.used.load(Relaxed);
            if used != tick {
                // Used since it was queued: it goes back under its last use.
                e.queued = used;
                self.lru.insert(used, key);
            } else if key == keep {
                // The newest entry came up first, so it is the only one left.
                self.lru.insert(tick, key);
                return false;
            } else {
                return self.remove(key);
            }
        }
        false
    }

    fn purge_expired(&mut self, now: Instant) {
        while let Some(&(at, key)) = self.expiry.first() {
            if at > now {
                break;
            }
            self.expiry.pop_first();
            self.remove(key);
        }
    }
}

/// One scope's vectors: an exact scan while small, an HNSW graph past `GRAPH_AT` entries.
enum Scope {
    /// Entry keys and their vectors, row `i` of `rows` (of the scope's dimension) for `keys[i]`.
    Flat { keys: Vec<u64>, rows: Vec<f32> },
    Graph(Box<Graph>),
}

struct Graph {
    /// Node `i` is the vector inserted as data id `i`.
    hnsw: Hnsw<'static, f32, Cosine>,
    /// The entry key of each node, `DEAD` for a tombstone.
    keys: Vec<u64>,
    dead: usize,
}

impl Scope {
    fn empty() -> Scope {
        Scope::Flat { keys: Vec::new(), rows: Vec::new() }
    }

    fn live(&self) -> usize {
        match self {
            Scope::Flat { keys, .. } => keys.len(),
            Scope::Graph(g) => g.keys.len() - g.dead,
        }
    }

    fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        let keys = match self {
            Scope::Flat { keys, .. } => keys,
            Scope::Graph(g) => &g.keys,
        };
        keys.iter().copied().filter(|&k| k != DEAD)
    }

    fn bytes(&self, dim: usize) -> usize {
        SCOPE_OVERHEAD
            + match self {
                Scope::Flat { keys, rows } => keys.capacity() * size_of::<u64>() + rows.capacity() * size_of::<f32>(),
                Scope::Graph(g) => {
                    size_of::<Graph>() + g.keys.capacity() * size_of::<u64>() + g.keys.len() * (vector_heap(dim) + GRAPH_NODE)
                }
            }
    }

    /// The most similar entry for which `alive` holds, with its similarity.
    fn nearest(&self, dim: usize, query: &Vector, alive: impl Fn(u64) -> bool) -> Option<(u64, f32)> {
        match self {
            Scope::Flat { keys, rows } => {
                let mut best: Option<(u64, f32)> = None;
                for (&key, row) in keys.iter().zip(rows.chunks_exact(dim)) {
                    let similarity = dot(&query.0, row);
                    if best.is_none_or(|(_, b)| similarity > b) && alive(key) {
                        best = Some((key, similarity));
                    }
                }
                best
            }
            Scope::Graph(g) => g.nearest(query, alive),
        }
    }

    /// Adds entry `key` (already in `entries`) and records its slot there.
    fn add(&mut self, dim: usize, key: u64, vector: Vector, entries: &mut HashMap<u64, Entry>) {
        match self {
            Scope::Flat { keys, rows } => {
                keys.push(key);
                rows.extend_from_slice(&vector.0);
                if keys.len() < GRAPH_AT {
                    set_slot(entries, key, keys.len() - 1);
                    return;
                }
                let live = keys.iter().copied().zip(rows.chunks_exact(dim).map(|r| Vector(Arc::from(r))));
                *self = Scope::Graph(Box::new(Graph::build(live)));
                self.reslot(entries);
            }
            Scope::Graph(g) => {
                g.hnsw.insert_slice((&vector.0, g.keys.len()));
                g.keys.push(key);
                set_slot(entries, key, g.keys.len() - 1);
            }
        }
    }

    /// Removes the entry at `slot` (already gone from `entries`), moving others' slots as needed.
    fn remove(&mut self, dim: usize, slot: usize, entries: &mut HashMap<u64, Entry>) {
        match self {
            Scope::Flat { keys, rows } => {
                if slot >= keys.len() {
                    return;
                }
                let last = keys.len() - 1;
                keys.swap_remove(slot);
                rows.copy_within(last * dim..(last + 1) * dim, slot * dim);
                rows.truncate(last * dim);
                if let Some(&moved) = keys.get(slot) {
                    set_slot(entries, moved, slot);
                }
                if keys.capacity() > 2 * keys.len() {
                    keys.shrink_to_fit();
                    rows.shrink_to_fit();
                }
            }
            Scope::Graph(g) => {
                let Some(key) = g.keys.get_mut(slot) else { return };
                if *key == DEAD {
                    return;
                }
                *key = DEAD;
                g.dead += 1;
                if 2 * g.dead > g.keys.len() {
                    let live: Vec<(u64, Vector)> = g.live().collect();
                    *self = if live.len() < FLAT_BELOW {
                        let keys = live.iter().map(|(k, _)| *k).collect();
                        let rows = live.iter().flat_map(|(_, v)| v.0.iter().copied()).collect();
                        Scope::Flat { keys, rows }
                    } else {
                        Scope::Graph(Box::new(Graph::build(live.into_iter())))
                    };
                    self.reslot(entries);
                }
            }
        }
    }

    fn reslot(&self, entries: &mut HashMap<u64, Entry>) {
        let keys = match self {
            Scope::Flat { keys, .. } => keys,
            Scope::Graph(g) => &g.keys,
        };
        for (slot, &key) in keys.iter().enumerate() {
            set_slot(entries, key, slot);
        }
    }
}

impl Graph {
    fn build(live: impl Iterator<Item = (u64, Vector)>) -> Graph {
        let hint = live.size_hint().0.max(GRAPH_AT);
        let hnsw = Hnsw::new(M, hint, LAYERS, EF_CONSTRUCTION, Cosine);
        let mut keys = Vec::with_capacity(hint);
        for (key, vector) in live {
            hnsw.insert_slice((&vector.0, keys.len()));
            keys.push(key);
        }
        Graph { hnsw, keys, dead: 0 }
    }

    fn live(&self) -> impl Iterator<Item = (u64, Vector)> + '_ {
        let points = self.hnsw.get_point_indexation().into_iter();
        points.filter_map(|p| {
            let key = self.keys.get(p.get_origin_id()).copied().filter(|&k| k != DEAD)?;
            Some((key, Vector(Arc::from(p.get_v()))))
        })
    }

    /// The nearest node that holds a live entry: the first live one of the best `NEIGHBOURS` of
    /// an `EF_SEARCH` search; if all of those are dead or expired, one filtered search (which
    /// hnsw_rs runs without its early stop, so it is kept for that case).
    fn nearest(&self, query: &Vector, alive: impl Fn(u64) -> bool) -> Option<(u64, f32)> {
        let live = |node: usize| self.keys.get(node).copied().filter(|&k| k != DEAD && alive(k));
        let found = self.hnsw.search(&query.0, NEIGHBOURS, EF_SEARCH);
        if let Some(hit) = found.iter().find_map(|n| live(n.d_id).map(|k| (k, 1.0 - n.distance))) {
            return Some(hit);
        }
        if found.len() < NEIGHBOURS.min(self.keys.len()) {
            return None;
        }
        let filter = |node: &usize| live(*node).is_some();
        let best = self.hnsw.search_filter(&query.0, 1, EF_SEARCH, Some(&filter)).into_iter().next()?;
        Some((live(best.d_id)?, 1.0 - best.distance))
    }
}

/// A stored vector, normalised; shared between a graph and its rebuild.
#[derive(Clone)]
struct Vector(Arc<[f32]>);

/// Cosine distance of normalised vectors, `1 - dot`, kept in [0, 2] (rounding must not make it
/// negative).
struct Cosine;

impl Distance<f32> for Cosine {
    fn eval(&self, a: &[f32], b: &[f32]) -> f32 {
        (1.0 - dot(a, b)).clamp(0.0, 2.0)
    }
}

fn set_slot(entries: &mut HashMap<u64, Entry>, key: u64, slot: usize) {
    if let Some(e) = entries.get_mut(&key) {
        e.slot = slot;
    }
}

/// Heap bytes of one graph vector: the `Arc`'s counts and the floats, in 16-byte malloc chunks.
fn vector_heap(dim: usize) -> usize {
    (2 * size_of::<usize>() + dim * size_of::<f32>() + size_of::<usize>()).next_multiple_of(16)
}

/// The most a scan scope holding one entry takes: rows and keys at a grown capacity of 4.
fn flat_alone(dim: usize) -> usize {
    4 * (dim * size_of::<f32>() + size_of::<u64>())
}

/// `v` scaled to length 1; `None` if it is empty, all zero, or not finite.
fn normalised(v: &[f32]) -> Option<Vector> {
    let mut max = 0.0f32;
    for &x in v {
        if !x.is_finite() {
            return None;
        }
        max = max.max(x.abs());
    }
    if max == 0.0 {
        return None;
    }
    // Scaled by the largest component first, so the sum of squares cannot overflow.
    let scaled: Vec<f32> = v.iter().map(|x| x / max).collect();
    let norm = dot(&scaled, &scaled).sqrt();
    Some(Vector(scaled.iter().map(|x| x / norm).collect()))
}

/// Dot product in eight independent lanes, which the compiler turns into SIMD.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a8.remainder().iter().zip(b8.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in a8.zip(b8) {
        for ((lane, x), y) in lanes.iter_mut().zip(x).zip(y) {
            *lane += x * y;
        }
    }
    lanes.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::time::Duration;

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(3600)
    }

    fn random(rng: &mut SmallRng, dim: usize) -> Vec<f32> {
        (0..dim).map(|_| rng.random_range(-1.0f32..1.0)).collect()
    }

    /// `v` plus uniform noise of at most `amount` per component.
    fn noisy(rng: &mut SmallRng, v: &[f32], amount: f32) -> Vec<f32> {
        v.iter().map(|x| x + rng.random_range(-amount..amount)).collect()
    }

    /// A unit vector at cosine similarity `cos` to the unit vector `e0`, toward `e1`.
    fn at_cosine(dim: usize, cos: f32) -> Vec<f32> {
        let mut v = vec![0.0; dim];
        v[0] = cos;
        v[1] = (1.0 - cos * cos).sqrt();
        v
    }

    fn axis(dim: usize, i: usize) -> Vec<f32> {
        let mut v = vec![0.0; dim];
        v[i] = 1.0;
        v
    }

    /// `bytes` recounted from the structures, to pin the running total.
    fn recount(index: &SemanticIndex) -> usize {
        let inner = index.inner.read();
        let entries: usize = inner.entries.values().map(|e| ENTRY_OVERHEAD + e.answer.len()).sum();
        let routes: usize = inner
            .routes
            .iter()
            .map(|(name, scopes)| {
                ROUTE_OVERHEAD + name.len() + scopes.iter().map(|(at, s)| s.bytes(at.dim)).sum::<usize>()
            })
            .sum();
        entries + routes
    }

    /// Every structure agrees on which entries exist, and slots point back at their keys.
    fn check_consistent(index: &SemanticIndex) {
        let inner = index.inner.read();
        assert_eq!(inner.lru.len(), inner.entries.len());
        assert_eq!(inner.expiry.len(), inner.entries.len());
        let mut in_scopes = 0;
        for (route, scopes) in &inner.routes {
            for (at, scope) in scopes {
                assert!(scope.live() > 0, "an empty scope is dropped");
                for (slot, key) in match scope {
                    Scope::Flat { keys, .. } => keys.iter().enumerate(),
                    Scope::Graph(g) => g.keys.iter().enumerate(),
                } {
                    if *key == DEAD {
                        continue;
                    }
                    let e = &inner.entries[key];
                    assert_eq!((e.slot, &*e.route, e.scope.scope, e.scope.dim), (slot, &**route, at.scope, at.dim));
                    in_scopes += 1;
                }
            }
        }
        assert_eq!(in_scopes, inner.entries.len());
        drop(inner);
        assert_eq!(index.bytes(), recount(index));
    }

    #[test]
    fn index_is_send_and_sync() {
        fn shared<T: Send + Sync>() {}
        shared::<SemanticIndex>();
    }

    #[test]
    fn an_exact_match_hits_with_similarity_one() {
        let index = SemanticIndex::new(100, 1 << 20);
        let v = [0.3, -1.2, 4.0, 0.5];
        let key = index.insert("chat", 7, &v, Bytes::from_static(b"answer"), later()).unwrap();
        // Scaled is the same direction.
        let hit = index.lookup("chat", 7, &[0.6, -2.4, 8.0, 1.0], 0.97).unwrap();
        assert_eq!((hit.key, &hit.answer[..]), (key, &b"answer"[..]));
        assert!((hit.similarity - 1.0).abs() < 1e-6, "{}", hit.similarity);
        assert!(index.lookup("chat", 7, &v, 1.0).is_some(), "a threshold of 1 still takes an exact match");
    }

    #[test]
    fn threshold_separates_near_from_far() {
        for dim in [8, 384] {
            let index = SemanticIndex::new(100, 1 << 22);
            index.insert("chat", 1, &axis(dim, 0), Bytes::from_static(b"a"), later()).unwrap();
            let near = index.lookup("chat", 1, &at_cosine(dim, 0.96), 0.95).expect("0.96 >= 0.95 hits");
            assert!((near.similarity - 0.96).abs() < 1e-4, "{}", near.similarity);
            assert!(index.lookup("chat", 1, &at_cosine(dim, 0.94), 0.95).is_none(), "0.94 < 0.95 misses");
            assert!(index.lookup("chat", 1, &at_cosine(dim, 0.9), 0.9).is_some());
            assert!(index.lookup("chat", 1, &at_cosine(dim, -0.5), -1.0).is_some(), "-1 takes the nearest");
            assert!(index.lookup("chat", 1, &axis(dim, 2), 0.5).is_none(), "an orthogonal prompt misses");
        }
    }

    #[test]
    fn the_nearest_of_several_is_returned() {
        let index = SemanticIndex::new(100, 1 << 20);
        let far = index.insert("chat", 1, &at_cosine(16, 0.91), Bytes::from_static(b"far"), later()).unwrap();
        let near = index.insert("chat", 1, &at_cosine(16, 0.99), Bytes::from_static(b"near"), later()).unwrap();
        assert_ne!(far, near);
        assert_eq!(index.lookup("chat", 1, &axis(16, 0), 0.9).unwrap().key, near);
    }

    #[test]
    fn another_scope_route_or_dimension_misses() {
        let index = SemanticIndex::new(100, 1 << 20);
        let v = [1.0, 2.0, 3.0, 4.0];
        index.insert("chat", 1, &v, Bytes::from_static(b"tenant 1"), later()).unwrap();
        assert!(index.lookup("chat", 2, &v, 0.9).is_none(), "another tenant's identical prompt misses");
        assert!(index.lookup("embed", 1, &v, 0.9).is_none(), "another route misses");
        assert!(index.lookup("chat", 1, &[1.0, 2.0, 3.0, 4.0, 0.0], 0.9).is_none(), "another dimension misses");
        index.insert("chat", 1, &[1.0, 2.0, 3.0, 4.0, 0.0], Bytes::from_static(b"5 dims"), later()).unwrap();
        assert_eq!(&index.lookup("chat", 1, &v, 0.9).unwrap().answer[..], b"tenant 1");
        assert_eq!(&index.lookup("chat", 1, &[1.0, 2.0, 3.0, 4.0, 0.0], 0.9).unwrap().answer[..], b"5 dims");
    }

    #[test]
    fn bad_vectors_and_thresholds_are_refused_without_panic() {
        let index = SemanticIndex::new(100, 1 << 20);
        let answer = || Bytes::from_static(b"x");
        for bad in [&[][..], &[0.0, 0.0], &[f32::NAN, 1.0], &[f32::INFINITY, 1.0], &[1.0, f32::NEG_INFINITY]] {
            assert_eq!(index.insert("r", 1, bad, answer(), later()), None, "{bad:?}");
            assert!(index.lookup("r", 1, bad, 0.5).is_none(), "{bad:?}");
        }
        assert_eq!(index.len(), 0);
        // Huge components: the squares would overflow without scaling.
        index.insert("r", 1, &[f32::MAX, f32::MAX], answer(), later()).unwrap();
        let hit = index.lookup("r", 1, &[1e-30, 1e-30], 0.99).unwrap();
        assert!((hit.similarity - 1.0).abs() < 1e-6);
        for threshold in [f32::NAN, 1.5, f32::INFINITY] {
            assert!(index.lookup("r", 1, &[1.0, 1.0], threshold).is_none(), "{threshold}");
        }
        assert!(index.lookup("r", 1, &[-1.0, -1.0], f32::NEG_INFINITY).is_some());
        assert_eq!(index.insert("r", 1, &[1.0, 0.0], answer(), Instant::now()), None, "already expired");
        assert_eq!(SemanticIndex::new(0, 1 << 20).insert("r", 1, &[1.0], answer(), later()), None);
    }

    #[tokio::test(start_paused = true)]
    async fn expired_entries_miss_and_are_purged() {
        let index = SemanticIndex::new(100, 1 << 20);
        let v = [1.0, 0.0, 0.0];
        index.insert("chat", 1, &v, Bytes::from_static(b"old"), Instant::now() + Duration::from_secs(10)).unwrap();
        assert!(index.lookup("chat", 1, &v, 0.9).is_some());
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(index.lookup("chat", 1, &v, 0.9).is_none(), "expired entries miss");
        index.insert("chat", 1, &[0.0, 1.0, 0.0], Bytes::from_static(b"new"), Instant::now() + Duration::from_secs(10));
        assert_eq!(index.len(), 1, "an insert purges expired entries");
        check_consistent(&index);
    }

    #[test]
    fn the_same_prompt_replaces_its_entry() {
        let index = SemanticIndex::new(100, 1 << 20);
        let first = index.insert("chat", 1, &[1.0, 2.0], Bytes::from_static(b"first"), later()).unwrap();
        let second = index.insert("chat", 1, &[2.0, 4.0], Bytes::from_static(b"second"), later()).unwrap();
        assert_ne!(first, second);
        assert_eq!(index.len(), 1);
        assert_eq!(&index.lookup("chat", 1, &[1.0, 2.0], 0.9).unwrap().answer[..], b"second");
        check_consistent(&index);
    }

    #[test]
    fn eviction_holds_both_caps_and_spares_the_recently_used() {
        let mut rng = SmallRng::seed_from_u64(1);
        let max_bytes = 128 * 1024;
        let index = SemanticIndex::new(100, max_bytes);
        let kept_v = random(&mut rng, 32);
        let kept = index.insert("chat", 1, &kept_v, Bytes::from(vec![0; 100]), later()).unwrap();
        let dropped = index.insert("chat", 1, &random(&mut rng, 32), Bytes::from(vec![1; 100]), later()).unwrap();
        for i in 0..3_000usize {
            // Small answers first (the entry cap binds), then large ones (the byte cap binds);
            // scopes and routes mixed, so scopes come and go.
            let answer = Bytes::from(vec![2; if i < 1_500 { 10 } else { (i * 37) % 3_000 }]);
            let route = if i % 3 == 0 { "chat" } else { "embed" };
            index.insert(route, i as u64 % 5, &random(&mut rng, 32), answer, later()).unwrap();
            assert_eq!(index.lookup("chat", 1, &kept_v, 0.99).map(|h| h.key), Some(kept), "a used entry survives");
            assert!(index.len() <= 100, "{}", index.len());
            assert!(index.bytes() <= max_bytes, "{}", index.bytes());
            if i == 1_499 {
                assert_eq!(index.len(), 100, "the entry cap binds");
            }
            if i % 97 == 0 {
                check_consistent(&index);
            }
        }
        assert!(!index.inner.read().entries.contains_key(&dropped), "the unused one went");
        assert!(index.len() < 100 && index.bytes() > max_bytes * 9 / 10, "the byte cap binds: {}", index.bytes());
        check_consistent(&index);
    }

    #[test]
    fn an_entry_larger_than_the_byte_cap_is_refused() {
        let index = SemanticIndex::new(100, 16 * 1024);
        let small = index.insert("chat", 1, &[1.0, 0.0], Bytes::from(vec![0; 1000]), later()).unwrap();
        assert_eq!(index.insert("chat", 1, &[0.0, 1.0], Bytes::from(vec![0; 16 * 1024]), later()), None);
        assert_eq!(index.lookup("chat", 1, &[1.0, 0.0], 0.9).unwrap().key, small, "a refusal evicts nothing");
        // One that fits alone but not beside the other evicts it.
        index.insert("chat", 1, &[0.0, 1.0], Bytes::from(vec![0; 15 * 1024]), later()).unwrap();
        assert_eq!(index.len(), 1);
        assert!(index.bytes() <= 16 * 1024);
        check_consistent(&index);
    }

    #[test]
    fn clear_route_clears_only_that_route() {
        let index = SemanticIndex::new(10_000, 1 << 26);
        let mut rng = SmallRng::seed_from_u64(2);
        for i in 0..600 {
            // Scope 0 of "chat" grows past the scan into a graph.
            let scope = if i < 400 { 0 } else { i % 7 };
            index.insert("chat", scope, &random(&mut rng, 16), Bytes::from_static(b"c"), later()).unwrap();
        }
        let kept = random(&mut rng, 16);
        index.insert("embed", 0, &kept, Bytes::from_static(b"e"), later()).unwrap();
        assert_eq!(index.clear_route("chat"), 600);
        assert_eq!(index.clear_route("chat"), 0);
        assert_eq!(index.len(), 1);
        assert!(index.lookup("embed", 0, &kept, 0.99).is_some());
        check_consistent(&index);
        assert_eq!(index.clear(), 1);
        assert_eq!((index.len(), index.bytes()), (0, 0));
    }

    #[test]
    fn a_graph_scope_finds_near_neighbours() {
        let mut rng = SmallRng::seed_from_u64(3);
        let index = SemanticIndex::new(10_000, 1 << 28);
        let stored: Vec<(u64, Vec<f32>)> = (0..2_000)
            .map(|_| {
                let v = random(&mut rng, 64);
                (index.insert("chat", 1, &v, Bytes::from_static(b"a"), later()).unwrap(), v)
            })
            .collect();
        assert!(matches!(index.inner.read().routes["chat"][&ScopeKey { scope: 1, dim: 64 }], Scope::Graph(_)));
        let found = stored
            .iter()
            .filter(|(key, v)| index.lookup("chat", 1, &noisy(&mut rng, v, 0.05), 0.9).is_some_and(|h| h.key == *key))
            .count();
        assert!(found * 100 >= 95 * stored.len(), "recall {found}/2000");
        check_consistent(&index);
    }

    #[test]
    fn heavy_eviction_rebuilds_graphs_and_keeps_finding() {
        let mut rng = SmallRng::seed_from_u64(4);
        let index = SemanticIndex::new(600, 1 << 28);
        let mut recent = std::collections::VecDeque::new();
        for _ in 0..4_000 {
            let v = random(&mut rng, 32);
            let key = index.insert("chat", 1, &v, Bytes::from_static(b"a"), later()).unwrap();
            recent.push_back((key, v));
            if recent.len() > 600 {
                recent.pop_front();
            }
        }
        {
            let inner = index.inner.read();
            let Scope::Graph(g) = &inner.routes["chat"][&ScopeKey { scope: 1, dim: 32 }] else { panic!("a graph") };
            assert!(g.keys.len() <= 2 * 600 + 1, "tombstones are bounded: {} nodes", g.keys.len());
            assert_eq!(g.keys.len() - g.dead, 600);
        }
        let found = recent.iter().filter(|(key, v)| index.lookup("chat", 1, v, 0.99).is_some_and(|h| h.key == *key)).count();
        assert!(found * 100 >= 99 * recent.len(), "the live entries are found: {found}/600");
        check_consistent(&index);
    }

    #[test]
    fn a_graph_emptied_by_eviction_becomes_a_scan_again() {
        let mut rng = SmallRng::seed_from_u64(5);
        let cap = GRAPH_AT + 10;
        let index = SemanticIndex::new(cap, 1 << 28);
        let first: Vec<(u64, Vec<f32>)> = (0..cap)
            .map(|_| {
                let v = random(&mut rng, 8);
                (index.insert("chat", 1, &v, Bytes::from_static(b"a"), later()).unwrap(), v)
            })
            .collect();
        let at = ScopeKey { scope: 1, dim: 8 };
        assert!(matches!(index.inner.read().routes["chat"][&at], Scope::Graph(_)));
        // Another scope's inserts evict scope 1's entries, oldest first.
        let mut inserted = 0;
        while index.inner.read().routes["chat"][&at].live() > 40 {
            index.insert("chat", 2, &random(&mut rng, 8), Bytes::from_static(b"b"), later()).unwrap();
            inserted += 1;
            assert!(inserted <= cap, "scope 1 shrinks");
        }
        assert!(matches!(index.inner.read().routes["chat"][&at], Scope::Flat { .. }));
        for (key, v) in &first[cap - 40..] {
            assert_eq!(index.lookup("chat", 1, v, 0.999).map(|h| h.key), Some(*key));
        }
        check_consistent(&index);
    }

    #[test]
    fn concurrent_lookups_and_inserts_keep_the_caps() {
        let index = Arc::new(SemanticIndex::new(300, 1 << 22));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let index = index.clone();
                std::thread::spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(10 + t);
                    for i in 0..500 {
                        let v = random(&mut rng, 24);
                        if i % 2 == 0 {
                            index.insert("chat", t % 2, &v, Bytes::from_static(b"a"), later());
                        } else {
                            index.lookup("chat", t % 2, &v, 0.5);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(index.len() <= 300);
        check_consistent(&index);
    }
}
