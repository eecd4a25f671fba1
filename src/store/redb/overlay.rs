//! [`Overlay`]: a storage backend that reads a store file and never writes it. Writes (the
//! storage engine's own repair and commits while it checks or opens a file) land in memory, over
//! the file's bytes. A length beyond the file's reads as zeros, so a truncated file can be padded
//! back to the length its header records.
//!
//! fsck opens the store file through it to run redb's own integrity check (every page's
//! checksum) without changing the file, and salvage opens a damaged or truncated copy with it.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Mutex;

use std::ops::Bound;

use redb::{BackendError, StorageBackend};

/// The granularity of the in-memory layer.
const PAGE: u64 = 4096;

/// A read-only file with an in-memory layer of writes over it.
#[derive(Debug)]
pub(crate) struct Overlay {
    file: File,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// The logical length.
    len: u64,
    /// How much of the file shows through (bytes past it read as zeros): its length, or less
    /// once the length was set below it.
    visible: u64,
    /// Pages written, by page number.
    pages: HashMap<u64, Vec<u8>>,
}

impl Overlay {
    /// An overlay on `file`, `len` bytes long (at least the file's length: the rest reads as
    /// zeros).
    pub(crate) fn new(file: File, len: u64) -> io::Result<Self> {
        let file_len = file.metadata()?.len();
        Ok(Overlay {
            file,
            state: Mutex::new(State {
                len: len.max(file_len),
                visible: file_len,
                pages: HashMap::new(),
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Page `no` as the file (and zeros past what shows of it) holds it.
    fn base_page(&self, visible: u64, no: u64) -> io::Result<Vec<u8>> {
        let mut page = vec![0u8; PAGE as usize];
        let start = no * PAGE;
        if start < visible {
            let want = (visible - start).min(PAGE) as usize;
            read_full(&self.file, start, &mut page[..want])?;
        }
        Ok(page)
    }
}

/// Reads exactly `out.len()` bytes at `offset`; bytes past the end of the file read as zeros.
fn read_full(file: &File, offset: u64, out: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < out.len() {
        match file.read_at(&mut out[done..], offset + done as u64) {
            Ok(0) => {
                out[done..].fill(0);
                break;
            }
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn out_of_range() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "read past the end of the store",
    )
}

impl StorageBackend for Overlay {
    fn len(&self) -> Result<u64, io::Error> {
        Ok(self.lock().len)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        let state = self.lock();
        let end = offset
            .checked_add(out.len() as u64)
            .ok_or_else(out_of_range)?;
        if end > state.len {
            return Err(out_of_range());
        }
        let mut at = offset;
        let mut done = 0usize;
        while done < out.len() {
            let no = at / PAGE;
            let within = (at % PAGE) as usize;
            let take = (PAGE as usize - within).min(out.len() - done);
            match state.pages.get(&no) {
                Some(page) => out[done..done + take].copy_from_slice(&page[within..within + take]),
                None if at >= state.visible => out[done..done + take].fill(0),
                None => {
                    let shown = ((state.visible - at) as usize).min(take);
                    read_full(&self.file, at, &mut out[done..done + shown])?;
                    out[done + shown..done + take].fill(0);
                }
            }
            done += take;
            at += take as u64;
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        let mut state = self.lock();
        if len < state.len {
            // What lies past the new end must read as zeros if the length grows again.
            let boundary = len / PAGE;
            if !len.is_multiple_of(PAGE) {
                let mut page = match state.pages.remove(&boundary) {
                    Some(page) => page,
                    None => self.base_page(state.visible, boundary)?,
                };
                page[(len % PAGE) as usize..].fill(0);
                state.pages.insert(boundary, page);
            }
            state.pages.retain(|no, _| *no * PAGE < len);
            state.visible = state.visible.min(len);
        }
        state.len = len;
        Ok(())
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        Ok(())
    }

    // Byte-range locks: the overlay is private to one handle in one process (salvage opens it
    // read-only in a multi-process mode, which loads no allocator state, so that a file whose
    // allocator pages were lost still opens): every lock is granted, none conflicts.
    fn try_lock_range(&self, _: Bound<u64>, _: Bound<u64>) -> Result<bool, BackendError> {
        Ok(true)
    }

    fn try_lock_shared_range(&self, _: Bound<u64>, _: Bound<u64>) -> Result<bool, BackendError> {
        Ok(true)
    }

    fn lock_range(&self, _: Bound<u64>, _: Bound<u64>) -> Result<(), BackendError> {
        Ok(())
    }

    fn lock_shared_range(&self, _: Bound<u64>, _: Bound<u64>) -> Result<(), BackendError> {
        Ok(())
    }

    fn unlock_range(&self, _: Bound<u64>, _: Bound<u64>) -> Result<(), BackendError> {
        Ok(())
    }

    fn query_lock_range(&self, _: Bound<u64>, _: Bound<u64>) -> Result<bool, BackendError> {
        Ok(false)
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        let mut state = self.lock();
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or_else(out_of_range)?;
        if end > state.len {
            return Err(out_of_range());
        }
        let mut at = offset;
        let mut done = 0usize;
        while done < data.len() {
            let no = at / PAGE;
            let within = (at % PAGE) as usize;
            let take = (PAGE as usize - within).min(data.len() - done);
            if !state.pages.contains_key(&no) {
                let page = self.base_page(state.visible, no)?;
                state.pages.insert(no, page);
            }
            if let Some(page) = state.pages.get_mut(&no) {
                page[within..within + take].copy_from_slice(&data[done..done + take]);
            }
            done += take;
            at += take as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_stay_in_memory_and_the_tail_reads_as_zeros() -> io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let path = tmp.path().join("f");
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8 + 1).collect();
        std::fs::write(&path, &bytes)?;
        let overlay = Overlay::new(File::open(&path)?, 16_384)?;
        assert_eq!(overlay.len()?, 16_384);
        let mut out = vec![0u8; 200];
        overlay.read(9_900, &mut out)?;
        assert_eq!(&out[..100], &bytes[9_900..]);
        assert!(out[100..].iter().all(|b| *b == 0));
        overlay.write(4_090, &[9; 20])?;
        overlay.read(4_080, &mut out[..40])?;
        assert_eq!(&out[..10], &bytes[4_080..4_090]);
        assert_eq!(&out[10..30], &[9; 20]);
        assert_eq!(&out[30..40], &bytes[4_110..4_120]);
        overlay.set_len(5_000)?;
        overlay.set_len(12_000)?;
        overlay.read(4_990, &mut out[..20])?;
        assert_eq!(&out[..10], &bytes[4_990..5_000]);
        assert!(
            out[10..20].iter().all(|b| *b == 0),
            "shrunk away, then zeros"
        );
        assert!(overlay.read(11_990, &mut out[..20]).is_err());
        assert_eq!(std::fs::read(&path)?, bytes, "the file is untouched");
        Ok(())
    }
}
