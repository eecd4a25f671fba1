//! redb and PostgreSQL side by side (issue 19): commit of a small change (p50/p99), as-of in a
//! store of 10⁵ versions, history of one entity with 10 000 versions, and 4 handles × 4 threads
//! committing at once (aggregate tx/s). Prints one table; medians of the repeated reads.
//!
//! `STRATA_TEST_POSTGRES_URL=postgres://… cargo bench --bench backends` (`tools/pg-cluster start
//! DIR` makes a private cluster and prints its URL); without it only redb runs.
//! `STRATA_BENCH_SCALE=10` divides the sizes by 10 (a quick run).

#![allow(
    clippy::unwrap_used,
    clippy::print_stdout,
    reason = "a benchmark program"
)]

use std::time::{Duration, Instant};

use strata::object::Object;
use strata::{HistoryQuery, Op, Origin, PgLocation, PgOpen, Store, Timestamp, TxId, TxRequest};

fn scale() -> usize {
    std::env::var("STRATA_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
        .max(1)
}

fn prompt(id: &str, text: String) -> Object {
    Object::system_prompt(id, text).unwrap()
}

/// Writes `requests` through the backend's group commit, `per_group` at a time.
fn write_groups(store: &Store, requests: Vec<Vec<Op>>, per_group: usize) {
    let mut requests = requests.into_iter().peekable();
    while requests.peek().is_some() {
        let group: Vec<TxRequest> = requests
            .by_ref()
            .take(per_group)
            .map(|ops| TxRequest {
                ops,
                origin: Origin::Other("bench".into()),
                stat: None,
            })
            .collect();
        for result in store.transact_group(group) {
            result.unwrap();
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn micros(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

/// One backend's figures: (commit p50, commit p99, as-of p50, history median, tx/s).
fn run(name: &str, make: &dyn Fn() -> Store) -> Vec<String> {
    let s = scale();
    // Commits of a small change, one at a time.
    let store = make();
    let mut commits = Vec::new();
    for i in 0..(500 / s).max(20) {
        let ops = vec![Op::put(prompt("session", format!("turn {i}")))];
        let started = Instant::now();
        store.transact(ops, Origin::Session).unwrap();
        commits.push(started.elapsed());
    }
    commits.sort();
    // As-of in a store of 10^5 versions: 1 000 entities × 100 versions.
    let entities = 1000 / s;
    let requests: Vec<Vec<Op>> = (0..100)
        .map(|round| {
            (0..entities)
                .map(|e| Op::put(prompt(&format!("p{e}"), format!("{e} v{round}"))))
                .collect()
        })
        .collect();
    write_groups(&store, requests, 10);
    let (first, last) = (2u64, store.chain_head().unwrap().unwrap().0.0);
    let mut reads = Vec::new();
    for i in 0..(2000 / s).max(50) {
        let id = format!("system_prompt:p{}", (i * 7919) % entities);
        let tx = TxId(first + (i as u64 * 104_729) % (last - first));
        let started = Instant::now();
        store.as_of(&id, None, Some(tx)).unwrap();
        reads.push(started.elapsed());
    }
    reads.sort();
    // History of one entity with 10 000 versions.
    let versions = 10_000 / s;
    let requests: Vec<Vec<Op>> = (0..versions)
        .map(|v| {
            vec![Op::put_at(
                prompt("long", format!("v{v}")),
                Timestamp::from_micros(1_700_000_000_000_000 + v as i64 * 1_000_000).unwrap(),
                None,
            )]
        })
        .collect();
    write_groups(&store, requests, 100);
    let mut histories = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let h = store
            .history("system_prompt:long", HistoryQuery::default())
            .unwrap();
        assert_eq!(h.len(), versions);
        histories.push(started.elapsed());
    }
    histories.sort();
    drop(store);
    // 4 handles (daemons) × 4 threads (clients), committing small changes for a while.
    let handles: Vec<Store> = (0..4).map(|_| make_shared(name, make)).collect();
    let stop = Instant::now() + Duration::from_secs((8 / s as u64).max(2));
    let started = Instant::now();
    let threads: Vec<_> = handles
        .iter()
        .enumerate()
        .flat_map(|(h, store)| {
            (0..4).map(move |c| {
                let store = store.clone();
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    while Instant::now() < stop {
                        let ops = vec![Op::put(prompt(&format!("c{h}_{c}"), format!("{n}")))];
                        store.transact(ops, Origin::Session).unwrap();
                        n += 1;
                    }
                    n
                })
            })
        })
        .collect();
    let total: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let rate = total as f64 / started.elapsed().as_secs_f64();
    vec![
        name.to_string(),
        micros(percentile(&commits, 0.5)),
        micros(percentile(&commits, 0.99)),
        micros(percentile(&reads, 0.5)),
        format!("{:.1} ms", percentile(&histories, 0.5).as_secs_f64() * 1e3),
        format!("{rate:.0}"),
    ]
}

/// The store the concurrent writers share: redb allows one handle per file (so its 4 "daemons"
/// are one handle's group commit), PostgreSQL one handle (connection pool) per daemon.
fn make_shared(name: &str, make: &dyn Fn() -> Store) -> Store {
    use std::sync::Mutex;
    static SHARED: Mutex<Option<(String, Store)>> = Mutex::new(None);
    let mut shared = SHARED.lock().unwrap();
    match &*shared {
        Some((n, store)) if n == name => store.clone(),
        _ => {
            let store = make();
            *shared = Some((name.to_string(), store.clone()));
            store
        }
    }
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let mut rows = vec![run("redb", &|| {
        Store::open_or_create(dir.path().join("store")).unwrap()
    })];
    match std::env::var("STRATA_TEST_POSTGRES_URL") {
        Ok(url) => {
            let schema = format!("bench_{}", std::process::id());
            let location = PgLocation::parse(&format!("{url}?schema={schema}")).unwrap();
            rows.push(run("postgres", &|| {
                Store::postgres(location.clone(), None, PgOpen::OpenOrCreate).unwrap()
            }));
            let mut client = location.connect().unwrap();
            client
                .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
                .unwrap();
        }
        Err(_) => println!("STRATA_TEST_POSTGRES_URL is unset: redb only"),
    }
    let header = [
        "backend",
        "commit p50",
        "commit p99",
        "as-of p50 (1e5 versions)",
        "history 10 000",
        "4×4 tx/s",
    ];
    println!("| {} |", header.join(" | "));
    println!("|{}", " --- |".repeat(header.len()));
    for row in rows {
        println!("| {} |", row.join(" | "));
    }
}
