//! ULIDs for session and tool call ids: 48 bits of milliseconds and 80 bits that differ between
//! calls, in Crockford base32 (26 characters, sortable by time).

use std::sync::atomic::{AtomicU64, Ordering};

/// A per-process counter mixed into the random part, so two ids in one millisecond differ.
static COUNTER: AtomicU64 = AtomicU64::new(0);

const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// A new ULID.
pub(crate) fn new_ulid() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let millis = (now.as_millis() as u64) & ((1 << 48) - 1);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let local = 0u8;
    let seed = [
        now.as_nanos().to_le_bytes().as_slice(),
        std::process::id().to_le_bytes().as_slice(),
        count.to_le_bytes().as_slice(),
        (&raw const local as usize).to_le_bytes().as_slice(),
    ]
    .concat();
    let random = crate::hash::blake3(&seed);
    let mut value: u128 = u128::from(millis) << 80;
    for (i, byte) in random.iter().take(10).enumerate() {
        value |= u128::from(*byte) << (8 * i);
    }
    (0..26)
        .rev()
        .map(|i| ALPHABET[((value >> (5 * i)) & 31) as usize] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn ulids_are_26_characters_and_distinct() {
        let a = super::new_ulid();
        let b = super::new_ulid();
        assert_eq!(a.len(), 26);
        assert_ne!(a, b);
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()));
    }
}
