//! Deterministic object contents: byte `o` of object `key` is a pure function of
//! `(key, o)`, so a test or a benchmark can verify any byte of any range without keeping a
//! copy, and a server can be filled without storing anything but the key.

/// 64-bit FNV-1a of the key: the per-object seed.
pub fn seed(key: &str) -> u64 {
    key.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[inline]
fn word(seed: u64, index: u64) -> u64 {
    // splitmix64 of (seed, word index): cheap, and no two nearby words look alike.
    let mut z = seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Writes the bytes of `key` starting at `offset` into `out`.
pub fn fill(key: &str, offset: u64, out: &mut [u8]) {
    let s = seed(key);
    let mut pos = offset;
    let mut i = 0;
    while i < out.len() {
        let w = word(s, pos / 8).to_le_bytes();
        let within = (pos % 8) as usize;
        let n = (8 - within).min(out.len() - i);
        out[i..i + n].copy_from_slice(&w[within..within + n]);
        i += n;
        pos += n as u64;
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
    let mut expected = [0u8; 64 * 1024];
    for (n, chunk) in data.chunks(expected.len()).enumerate() {
        let at = offset + (n * expected.len()) as u64;
        let exp = &mut expected[..chunk.len()];
        fill(key, at, exp);
        if chunk != exp {
            let i = chunk
                .iter()
                .zip(exp.iter())
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            return Err(at + i as u64);
        }
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

    proptest! {
        #[test]
        fn any_window_matches_the_whole(offset in 0u64..5000, len in 0usize..3000) {
            let whole = generate("obj", 8000);
            let mut w = vec![0; len];
            fill("obj", offset, &mut w);
            prop_assert_eq!(&w[..], &whole[offset as usize..offset as usize + len]);
            prop_assert_eq!(verify("obj", offset, &w), Ok(()));
        }
    }
}
