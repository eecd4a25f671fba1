//! Hashing benches (divan): SHA-256 of bytes, streamed SHA-256 and canonical JSON (RFC 8785), each
//! over inputs of several sizes with a byte counter, so divan prints throughput; the time per KiB is
//! the median time divided by the size in KiB.
//!
//! Run: `cargo bench --bench hash`.

use divan::counter::BytesCount;
use divan::{Bencher, black_box};
use serde_json::{Value, json};
use strata::hash::{Sha256Stream, canonical_json, sha256};

fn main() {
    divan::main();
}

/// Input sizes in bytes: one small file, a typical source file, a large one.
const SIZES: &[usize] = &[1024, 16 * 1024, 1024 * 1024];

/// Deterministic, text-like bytes (a repeating code line), so no size shortcut can apply.
fn bytes(len: usize) -> Vec<u8> {
    b"    let value = store.get(&key).map_err(Error::io)?; // 0123456789\n"
        .iter()
        .copied()
        .cycle()
        .take(len)
        .collect()
}

/// A JSON object of about `len` bytes shaped like an envelope: nested maps, strings, numbers,
/// arrays, keys in an order that canonicalisation must sort.
fn document(len: usize) -> Value {
    let mut turns = Vec::new();
    let mut size = 0;
    let mut i: u64 = 0;
    while size < len {
        let turn = json!({
            "role": if i.is_multiple_of(2) { "user" } else { "assistant" },
            "content": format!("turn {i}: read src/lib.rs and tell me what \"hash\" does ✓"),
            "toolcall_refs": [format!("toolcall:{i:026}")],
            "n": i,
            "score": 0.5 + i as f64,
        });
        size += turn.to_string().len();
        turns.push(turn);
        i += 1;
    }
    json!({"type": "chat", "xt/id": "chat:01J0000000000000000000000", "turns": turns, "turn_count": i})
}

#[divan::bench(args = SIZES)]
fn sha256_bytes(bencher: Bencher, len: usize) {
    let data = bytes(len);
    bencher
        .counter(BytesCount::new(len))
        .bench(|| sha256(black_box(&data)));
}

#[divan::bench(args = SIZES)]
fn sha256_stream_64k_chunks(bencher: Bencher, len: usize) {
    let data = bytes(len);
    bencher.counter(BytesCount::new(len)).bench(|| {
        let mut stream = Sha256Stream::new();
        for chunk in black_box(&data).chunks(64 * 1024) {
            stream.update(chunk);
        }
        stream.finish()
    });
}

#[divan::bench(args = SIZES)]
fn canonical_json_text(bencher: Bencher, len: usize) {
    let doc = document(len);
    let text_len = doc.to_string().len();
    bencher.counter(BytesCount::new(text_len)).bench(|| {
        canonical_json(black_box(&doc))
            .map(|text| text.len())
            .unwrap_or(0)
    });
}
