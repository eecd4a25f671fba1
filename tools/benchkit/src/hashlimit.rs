//! hashlimit: the hardware limit of a full index, measured.
//!
//! Walks a directory (regular files only, symlinks not followed, `.git` and `.strata` skipped), then
//! reads every file and computes its SHA-256 with N threads (default 2), streaming through a reused
//! buffer so that memory stays flat. Prints one JSON object:
//! `{"files":…,"bytes":…,"threads":…,"walk_seconds":…,"hash_seconds":…,"seconds":…,"digest":"…"}`
//! where `digest` is the XOR of all file digests (so the work cannot be optimised away and two runs
//! over the same tree can be compared).
//!
//! With `--io OUT_DIR` each thread also compresses every file's bytes (zstd level 1, the store's
//! level, kept only when it shrinks them by an eighth), appends the result to its own file in
//! OUT_DIR and fsyncs that file at the end: the floor of what a full index must do with the same
//! bytes (read + hash + compress + write + fsync), `"io":true` in the JSON.
//!
//! Usage: `hashlimit DIR [--threads N] [--io OUT_DIR]`

use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let name = entry.file_name();
        if kind.is_dir() {
            if name == ".git" || name == ".strata" {
                continue;
            }
            walk(&entry.path(), out)?;
        } else if kind.is_file() {
            out.push(entry.path());
        }
    }
    Ok(())
}

struct Tally {
    bytes: u64,
    digest: [u8; 32],
}

fn hash_files(
    files: &[PathBuf],
    next: &AtomicUsize,
    mut out: Option<File>,
) -> Result<Tally, String> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut whole = Vec::new();
    let mut compressor = match out {
        Some(_) => Some(zstd::bulk::Compressor::new(1).map_err(|e| format!("zstd: {e}"))?),
        None => None,
    };
    let mut tally = Tally {
        bytes: 0,
        digest: [0; 32],
    };
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(path) = files.get(i) else {
            if let Some(out) = out.as_mut() {
                out.sync_all().map_err(|e| format!("fsync: {e}"))?;
            }
            return Ok(tally);
        };
        let mut file =
            File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let mut hasher = Sha256::new();
        loop {
            let n = file
                .read(&mut buf)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            if n == 0 {
                break;
            }
            tally.bytes += n as u64;
            hasher.update(&buf[..n]);
            if out.is_some() {
                whole.extend_from_slice(&buf[..n]);
            }
        }
        if let (Some(out), Some(zstd)) = (out.as_mut(), compressor.as_mut()) {
            let packed = zstd.compress(&whole).map_err(|e| format!("zstd: {e}"))?;
            let record = if packed.len() + packed.len() / 7 <= whole.len() {
                &packed
            } else {
                &whole
            };
            out.write_all(record).map_err(|e| format!("write: {e}"))?;
            whole.clear();
        }
        let digest: [u8; 32] = hasher.finalize().into();
        for (acc, b) in tally.digest.iter_mut().zip(digest) {
            *acc ^= b;
        }
    }
}

fn run() -> Result<String, String> {
    let mut args = std::env::args().skip(1);
    let mut dir = None;
    let mut threads = 2usize;
    let mut io_dir: Option<PathBuf> = None;
    while let Some(arg) = args.next() {
        if arg == "--io" {
            io_dir = Some(PathBuf::from(args.next().ok_or("--io needs a directory")?));
            continue;
        }
        if arg == "--threads" {
            let value = args.next().ok_or("--threads needs a number")?;
            threads = value
                .parse()
                .map_err(|_| format!("--threads: not a number: {value}"))?;
            if threads == 0 {
                return Err("--threads must be at least 1".into());
            }
        } else if dir.is_none() {
            dir = Some(PathBuf::from(arg));
        } else {
            return Err(format!(
                "unexpected argument {arg}; usage: hashlimit DIR [--threads N] [--io OUT_DIR]"
            ));
        }
    }
    let dir = dir.ok_or("usage: hashlimit DIR [--threads N] [--io OUT_DIR]")?;
    let start = Instant::now();
    let mut files = Vec::new();
    walk(&dir, &mut files).map_err(|e| format!("cannot walk {}: {e}", dir.display()))?;
    let walked = start.elapsed();
    let next = AtomicUsize::new(0);
    let mut outs = Vec::new();
    for t in 0..threads {
        outs.push(match &io_dir {
            Some(dir) => {
                let path = dir.join(format!("hashlimit-{t}.out"));
                Some(File::create(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?)
            }
            None => None,
        });
    }
    let results: Vec<Result<Tally, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = outs
            .into_iter()
            .map(|out| {
                let (files, next) = (&files, &next);
                scope.spawn(move || hash_files(files, next, out))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a hashing thread panicked".into()))
            })
            .collect()
    });
    let mut total = Tally {
        bytes: 0,
        digest: [0; 32],
    };
    for result in results {
        let tally = result?;
        total.bytes += tally.bytes;
        for (acc, b) in total.digest.iter_mut().zip(tally.digest) {
            *acc ^= b;
        }
    }
    let elapsed = start.elapsed();
    let hex: String = total.digest.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!(
        "{{\"files\":{},\"bytes\":{},\"threads\":{},\"io\":{},\"walk_seconds\":{:.6},\"hash_seconds\":{:.6},\"seconds\":{:.6},\"digest\":\"{}\"}}",
        files.len(),
        total.bytes,
        threads,
        io_dir.is_some(),
        walked.as_secs_f64(),
        (elapsed - walked).as_secs_f64(),
        elapsed.as_secs_f64(),
        hex
    ))
}

fn main() -> ExitCode {
    match run() {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("hashlimit: {message}");
            ExitCode::FAILURE
        }
    }
}
