//! What the semantic cache's index costs: one scope filled with 100,000 entries of 1 KiB
//! answers at two embedding sizes, then 10,000 lookups (half near-duplicates of stored prompts,
//! half unrelated) from one thread and from 64 concurrent tasks on the core's runtime.
//! Prints one table. RSS growth is the process's VmRSS across the fill (one process per row);
//! `bytes()` is the index's own estimate, both scaled to 100k entries.
//! Env: BENCH_SEMANTIC_ENTRIES (default 100000), BENCH_SEMANTIC_DIMS (default "384"; comma-separated for more rows).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use harness_core::cache::semantic::SemanticIndex;

const QUERIES: usize = 10_000;
const TASKS: usize = 64;
const THRESHOLD: f32 = 0.95;
/// Seeds of the unrelated queries start here, far from the stored ones.
const UNRELATED: u64 = 1 << 40;

/// Deterministic pseudo-random numbers, uniform in [-1, 1).
struct Noise(u64);

impl Noise {
    fn new(seed: u64) -> Noise {
        Noise(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// A random vector of length about 1.
    fn unit(&mut self, dim: usize) -> Vec<f32> {
        let scale = (3.0 / dim as f32).sqrt();
        (0..dim).map(|_| self.next() * scale).collect()
    }
}

/// Prompt embeddings as sentence encoders make them, not uniform noise (on which every ANN
/// graph visits most nodes): one of `TOPICS` topic centroids, plus a mix of `SHARED` directions
/// all prompts share, plus a little noise of their own. Unrelated prompts come out near 0.3
/// cosine, prompts of one topic near 0.65.
struct Prompts {
    dim: usize,
    topics: Vec<Vec<f32>>,
    shared: Vec<Vec<f32>>,
}

const TOPICS: u64 = 1_000;
const SHARED: usize = 32;

impl Prompts {
    fn new(dim: usize) -> Prompts {
        let mut n = Noise::new(1);
        let topics = (0..TOPICS).map(|_| n.unit(dim)).collect();
        let shared = (0..SHARED).map(|_| n.unit(dim)).collect();
        Prompts { dim, topics, shared }
    }

    fn prompt(&self, seed: u64) -> Vec<f32> {
        let mut n = Noise::new(seed);
        let mut v = self.topics[(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as usize % TOPICS as usize].clone();
        let mix = 0.7 / (SHARED as f32 / 3.0).sqrt();
        for s in &self.shared {
            let a = n.next() * mix;
            v.iter_mut().zip(s).for_each(|(x, y)| *x += a * y);
        }
        v.iter_mut().zip(n.unit(self.dim)).for_each(|(x, e)| *x += 0.2 * e);
        v
    }

    /// Query `j` and the key it should find: even ones are stored prompt `i` with a little
    /// noise (about 0.997 cosine), odd ones a prompt never stored.
    fn query(&self, j: usize, n: usize, keys: &[u64]) -> (Vec<f32>, Option<u64>) {
        if j & 1 == 0 {
            let i = (j * 7919) % n;
            let noise = Noise::new(UNRELATED / 2 + i as u64).unit(self.dim);
            let v = self.prompt(i as u64).iter().zip(noise).map(|(x, e)| x + 0.1 * e).collect();
            (v, Some(keys[i]))
        } else {
            (self.prompt(UNRELATED + j as u64), None)
        }
    }
}

fn rss_bytes() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next()?.parse().ok());
    kb.unwrap_or(0usize) * 1024
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

struct Lookups {
    latencies_us: Vec<f64>,
    wall: Duration,
    hits: usize,
    found: usize,
}

impl Lookups {
    fn row(&self, head: &str, from: &str) {
        let mut l = self.latencies_us.clone();
        l.sort_by(|a, b| a.total_cmp(b));
        let n = l.len() as f64;
        println!(
            "| {head} | {from} | {:.0} | {:.0} | {:.0} | {:.1}% | {:.1}% |",
            percentile(&l, 0.5),
            percentile(&l, 0.99),
            n / self.wall.as_secs_f64(),
            100.0 * self.hits as f64 / n,
            100.0 * self.found as f64 / (n / 2.0),
        );
    }
}

fn print_head(n: usize) {
    println!(
        "Semantic index: one scope of {n} entries (1 KiB answers); {QUERIES} lookups, half near-duplicates \
         (cosine ~0.997) and half unrelated prompts, threshold {THRESHOLD}; latencies in µs\n"
    );
    println!(
        "| dims | entries | insert total | RSS growth per 100k | bytes() per 100k | lookups from | p50 | p99 | lookups/s | hit rate | near-dups found |"
    );
    println!("|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|");
}

/// Runs queries `js`, timing each lookup alone; `found` counts near-duplicates that hit their own entry.
fn run(index: &SemanticIndex, js: impl Iterator<Item = usize>, n: usize, prompts: &Prompts, keys: &[u64]) -> Lookups {
    let mut out = Lookups { latencies_us: Vec::new(), wall: Duration::ZERO, hits: 0, found: 0 };
    for j in js {
        let (q, want) = prompts.query(j, n, keys);
        let t = Instant::now();
        let hit = index.lookup("chat", 1, &q, THRESHOLD);
        out.latencies_us.push(t.elapsed().as_secs_f64() * 1e6);
        out.hits += hit.is_some() as usize;
        out.found += (want.is_some() && hit.map(|h| h.key) == want) as usize;
    }
    out
}

fn main() {
    let n: usize = std::env::var("BENCH_SEMANTIC_ENTRIES").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let dims: Vec<usize> = std::env::var("BENCH_SEMANTIC_DIMS")
        .unwrap_or_else(|_| "384".into())
        .split(',')
        .filter_map(|d| d.trim().parse().ok())
        .collect();
    if std::env::var_os("BENCH_SEMANTIC_CHILD").is_none() {
        print_head(n);
        for dim in dims {
            // One process per row, so memory freed by one row cannot hide the next row's growth.
            let exe = std::env::current_exe().expect("own path");
            let status = std::process::Command::new(exe)
                .env("BENCH_SEMANTIC_CHILD", "1")
                .env("BENCH_SEMANTIC_DIMS", dim.to_string())
                .status()
                .expect("row process");
            assert!(status.success(), "row {dim}: {status}");
        }
        return;
    }
    let handle = harness_core::runtime::handle().expect("runtime");
    for dim in dims {
        let prompts = Prompts::new(dim);
        let index = Arc::new(SemanticIndex::new(n + 1, usize::MAX));
        let expires = tokio::time::Instant::now() + Duration::from_secs(24 * 3600);
        let rss0 = rss_bytes();
        let t = Instant::now();
        let keys: Vec<u64> = (0..n)
            .map(|i| {
                let answer = Bytes::from(vec![b'a'; 1024]);
                index.insert("chat", 1, &prompts.prompt(i as u64), answer, expires).expect("stored")
            })
            .collect();
        let insert = t.elapsed();
        let per_100k = |b: usize| b as f64 * 100_000.0 / n as f64 / (1 << 20) as f64;
        let rss = per_100k(rss_bytes().saturating_sub(rss0));
        let head = format!(
            "{dim} | {n} | {:.1} s | {rss:.0} MiB | {:.0} MiB",
            insert.as_secs_f64(),
            per_100k(index.bytes())
        );

        let t = Instant::now();
        let mut one = run(&index, 0..QUERIES, n, &prompts, &keys);
        one.wall = t.elapsed();
        one.row(&head, "1 thread");

        let (keys, prompts) = (Arc::new(keys), Arc::new(prompts));
        let t = Instant::now();
        let parts = handle.block_on(async {
            let tasks: Vec<_> = (0..TASKS)
                .map(|task| {
                    let (index, keys, prompts) = (index.clone(), keys.clone(), prompts.clone());
                    tokio::spawn(async move {
                        let mut part = Lookups { latencies_us: Vec::new(), wall: Duration::ZERO, hits: 0, found: 0 };
                        for j in (task..QUERIES).step_by(TASKS) {
                            let p = run(&index, std::iter::once(j), n, &prompts, &keys);
                            part.latencies_us.extend(p.latencies_us);
                            part.hits += p.hits;
                            part.found += p.found;
                            tokio::task::yield_now().await;
                        }
                        part
                    })
                })
                .collect();
            let mut parts = Vec::new();
            for task in tasks {
                parts.push(task.await.expect("lookup task"));
            }
            parts
        });
        let mut many = Lookups { latencies_us: Vec::new(), wall: t.elapsed(), hits: 0, found: 0 };
        for p in parts {
            many.latencies_us.extend(p.latencies_us);
            many.hits += p.hits;
            many.found += p.found;
        }
        many.row(&head, &format!("{TASKS} tasks"));
    }
}
