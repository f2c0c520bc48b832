//! Deterministic object contents: byte `o` of object `key` is a pure function of
//! `(key, o)`, so a test or a benchmark can verify any byte of any range without keeping a
//! copy, and a server can serve any number of objects without storing anything but keys.
//!
//! The bytes are cut from a table of [`TILES`] random tiles of [`TILE`] bytes, built once
//! per process: an object is a walk over tiles chosen by its key, starting at an offset
//! chosen by its key. So a server hands out slices of the one table (no copy, no per-byte
//! work) and knows each tile's checksum in advance, and two objects share their bytes only
//! if their keys pick the same start and the same tiles (for an object of one tile, about
//! one chance in 8 million).

use std::ops::Range;
use std::sync::OnceLock;

/// Bytes per tile.
pub const TILE: usize = 256 * 1024;

/// Tiles in the table: 8 MiB in all.
pub const TILES: usize = 32;

/// 64-bit FNV-1a of the key: the per-object seed.
pub fn seed(key: &str) -> u64 {
    key.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// splitmix64 of (seed, index): cheap, and no two nearby indices look alike.
#[inline]
pub fn mix(seed: u64, index: u64) -> u64 {
    let mut z = seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The tiles, one after another: `TILES * TILE` bytes.
pub fn table() -> &'static [u8] {
    static TABLE: OnceLock<Vec<u8>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (0..(TILES * TILE / 8) as u64)
            .flat_map(|w| mix(0x5eed_711e, w).to_le_bytes())
            .collect()
    })
}

/// Where the bytes of `range` of `key` lie in the [`table`]: `(tile, bytes within it)` for
/// each piece, in order. Every piece but the first and the last is a whole tile.
pub fn pieces(key: &str, range: Range<u64>) -> impl Iterator<Item = (usize, Range<usize>)> {
    let s = seed(key);
    // The object's byte 0 is byte `start` of its walk over tiles.
    let start = mix(s, u64::MAX) % TILE as u64;
    let (mut at, end) = (range.start + start, range.end.max(range.start) + start);
    std::iter::from_fn(move || {
        (at < end).then(|| {
            let n = at / TILE as u64;
            let within = (at % TILE as u64) as usize;
            let len = (TILE - within).min((end - at) as usize);
            at += len as u64;
            let tile = (mix(s, n) % TILES as u64) as usize;
            (tile, within..within + len)
        })
    })
}

/// Writes the bytes of `key` starting at `offset` into `out`.
pub fn fill(key: &str, offset: u64, out: &mut [u8]) {
    let table = table();
    let mut i = 0;
    for (tile, r) in pieces(key, offset..offset + out.len() as u64) {
        let from = &table[tile * TILE + r.start..tile * TILE + r.end];
        out[i..i + from.len()].copy_from_slice(from);
        i += from.len();
    }
}

/// The first `len` bytes of `key`.
pub fn generate(key: &str, len: usize) -> Vec<u8> {
    let mut v = vec![0; len];
    fill(key, 0, &mut v);
    v
}

/// Checks `data` against the bytes of `key` at `offset`; on mismatch returns the offset of
/// the first wrong byte.
pub fn verify(key: &str, offset: u64, data: &[u8]) -> Result<(), u64> {
    let table = table();
    let mut at = 0;
    for (tile, r) in pieces(key, offset..offset + data.len() as u64) {
        let want = &table[tile * TILE + r.start..tile * TILE + r.end];
        let got = &data[at..at + want.len()];
        if got != want {
            let i = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
            return Err(offset + (at + i) as u64);
        }
        at += want.len();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn keys_differ_and_corruption_is_located() {
        assert_ne!(generate("a", 64), generate("b", 64));
        let mut d = generate("k", 1000);
        assert_eq!(verify("k", 0, &d), Ok(()));
        d[777] ^= 1;
        assert_eq!(verify("k", 0, &d), Err(777));
    }

    #[test]
    fn an_object_crosses_tiles_and_each_middle_piece_is_a_whole_tile() {
        let len = 3 * TILE as u64 + 5;
        let walk: Vec<_> = pieces("big", 0..len).collect();
        assert!(walk.len() >= 4, "{walk:?}");
        assert_eq!(walk.iter().map(|(_, r)| r.len() as u64).sum::<u64>(), len);
        for (_, r) in &walk[1..walk.len() - 1] {
            assert_eq!(r.clone(), 0..TILE);
        }
        assert!(walk.iter().any(|p| p.0 != walk[0].0), "tiles vary");
        assert_eq!(pieces("big", 7..7).count(), 0);
    }

    #[test]
    fn objects_start_at_different_places_of_the_table() {
        let starts: std::collections::HashSet<_> = (0..100)
            .map(|i| pieces(&format!("k{i}"), 0..1).next().unwrap())
            .collect();
        assert!(starts.len() > 95, "{}", starts.len());
    }

    proptest! {
        #[test]
        fn any_window_matches_the_whole(offset in 0u64..600_000, len in 0usize..300_000) {
            let whole = generate("obj", 900_000);
            let mut w = vec![0; len];
            fill("obj", offset, &mut w);
            prop_assert_eq!(&w[..], &whole[offset as usize..offset as usize + len]);
            prop_assert_eq!(verify("obj", offset, &w), Ok(()));
        }
    }
}
