//! Synthetic objects (`sluice serve --synthetic SPEC`): keys made from templates, bytes from
//! `sluice_testdata::pattern`, sizes from the index. Nothing is kept per object but its
//! place in key order (4 bytes), so a server on one machine holds the millions of keys of
//! MLPerf's retinanet or a production dataset.
//!
//! A SPEC is a comma-separated list of families, each a preset (`retinanet`, `unet3d`,
//! `dlrm`, `flux`, optionally `:COUNT`) or `TEMPLATE:COUNTxSIZE`:
//!
//! - TEMPLATE is a key with `{i}` once, the object's index in decimal as DLIO writes it (no
//!   padding), and optionally `{n}`, the count: `train/img_{i}_of_{n}.jpeg`.
//! - SIZE is a size (`322957`, `4MiB`) or `MEAN±SD` (also `MEAN+-SD`): sizes drawn from a
//!   normal distribution seeded by the template, at least 1 byte, the same at every start.

use bytes::Bytes;
use crc_fast::CrcAlgorithm::Crc64Nvme;
use sluice_core::checksum::Crc;
use sluice_testdata::pattern::{self, TILE, TILES};
use std::fmt;
use std::sync::OnceLock;

/// A parsed SPEC: the families, before their key order is built.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec(Vec<FamilySpec>);

/// One family of a SPEC.
#[derive(Debug, Clone, PartialEq)]
pub struct FamilySpec {
    /// The key before `{i}`, `{n}` already replaced.
    head: String,
    /// The key after `{i}`, `{n}` already replaced.
    tail: String,
    count: u32,
    sizes: Sizes,
}

/// How big a family's objects are.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sizes {
    /// Every object the same.
    Fixed(u64),
    /// Drawn per index from a normal distribution, at least 1 byte.
    Normal {
        /// The mean.
        mean: u64,
        /// The standard deviation.
        sd: u64,
    },
}

/// The MLPerf Storage v3.0 workloads' datasets, as DLIO lays them out (the figures are the
/// workload configs': mlcommons/storage `configs/dlio/workload/*_b200.yaml`).
const PRESETS: &[(&str, &str)] = &[
    ("retinanet", "train/img_{i}_of_{n}.jpeg:1170301x322957"),
    ("unet3d", "train/img_{i}_of_{n}.npz:7200x146600628±68341808"),
    ("dlrm", "train/img_{i}_of_{n}.parquet:1024x3590848512"),
    ("flux", "train/img_{i}_of_{n}.parquet:4296x623471616"),
];

const EXAMPLE: &str = "train/img_{i}_of_{n}.jpeg:1170301x322957, or a preset: retinanet[:COUNT]";

impl Spec {
    /// Parses a SPEC; the error names the part at fault and gives an example.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let families = spec
            .split(',')
            .map(str::trim)
            .map(FamilySpec::parse)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self(families))
    }

    /// Objects in all families.
    pub fn objects(&self) -> u64 {
        self.0.iter().map(|f| u64::from(f.count)).sum()
    }
}

impl FamilySpec {
    fn parse(item: &str) -> Result<Self, String> {
        let bad = |why: String| format!("--synthetic {item:?}: {why}; write e.g. {EXAMPLE}");
        if item.is_empty() {
            return Err(bad("an empty family".into()));
        }
        if !item.contains('{') {
            let (name, count) = match item.split_once(':') {
                Some((n, c)) => (n, Some(c)),
                None => (item, None),
            };
            let Some((_, template)) = PRESETS.iter().find(|(p, _)| *p == name) else {
                let names: Vec<_> = PRESETS.iter().map(|(p, _)| *p).collect();
                return Err(bad(format!(
                    "{name:?} is neither a template with {{i}} nor a preset ({})",
                    names.join(", ")
                )));
            };
            let mut f = Self::parse(template).expect("the presets parse");
            if let Some(c) = count {
                f = Self::parse(&template.replacen(
                    &format!(":{}x", f.count),
                    &format!(":{c}x"),
                    1,
                ))
                .map_err(|e| e.replace(template, item))?;
            }
            return Ok(f);
        }
        let (template, shape) = item
            .rsplit_once(':')
            .ok_or_else(|| bad("no :COUNTxSIZE after the template".into()))?;
        let (count, size) = shape
            .split_once('x')
            .ok_or_else(|| bad(format!("{shape:?} is not COUNTxSIZE")))?;
        let count: u64 = count
            .trim()
            .parse()
            .map_err(|_| bad(format!("count {count:?} is not a whole number")))?;
        let count = u32::try_from(count)
            .ok()
            .filter(|c| *c > 0)
            .ok_or_else(|| bad(format!("count {count} is not between 1 and {}", u32::MAX)))?;
        let sizes = Sizes::parse(size).map_err(bad)?;
        let template = template.replace("{n}", &count.to_string());
        let (head, tail) = template
            .split_once("{i}")
            .ok_or_else(|| bad("the template has no {i}".into()))?;
        if tail.contains("{i}") {
            return Err(bad("the template has {i} more than once".into()));
        }
        if tail.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(bad("a digit right after {i} makes keys ambiguous".into()));
        }
        Ok(Self {
            head: head.to_owned(),
            tail: tail.to_owned(),
            count,
            sizes,
        })
    }
}

impl Sizes {
    fn parse(s: &str) -> Result<Self, String> {
        let one =
            |v: &str| sluice_core::settings::size(v.trim()).map_err(|e| format!("size {v:?}: {e}"));
        let sizes = match s.split_once('±').or_else(|| s.split_once("+-")) {
            Some((mean, sd)) => Sizes::Normal {
                mean: one(mean)?,
                sd: one(sd)?,
            },
            None => Sizes::Fixed(one(s)?),
        };
        match sizes {
            Sizes::Fixed(0) | Sizes::Normal { mean: 0, .. } => {
                Err(format!("size {s:?} is 0; objects have at least 1 byte"))
            }
            s => Ok(s),
        }
    }

    /// The size of object `i` of the family seeded `seed`.
    fn of(self, seed: u64, i: u32) -> u64 {
        match self {
            Sizes::Fixed(n) => n,
            Sizes::Normal { mean, sd } => {
                // Box-Muller over two uniform draws in (0, 1].
                let u = |k| (pattern::mix(seed, 2 * u64::from(i) + k) >> 11) as f64 + 1.0;
                let (u1, u2) = (u(0) / (1u64 << 53) as f64, u(1) / (1u64 << 53) as f64);
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                (mean as f64 + sd as f64 * z).round().max(1.0) as u64
            }
        }
    }
}

impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, fam) in self.0.iter().enumerate() {
            let sep = if n == 0 { "" } else { ", " };
            write!(f, "{sep}{} × {}{{i}}{}", fam.count, fam.head, fam.tail)?;
        }
        Ok(())
    }
}

/// One family, ready to answer: its keys in S3's order.
#[derive(Debug)]
struct Family {
    spec: FamilySpec,
    /// Seeds the sizes and the ETags.
    seed: u64,
    /// The indices, in the order of their keys (byte order, as S3 lists).
    order: Vec<u32>,
}

impl Family {
    fn new(spec: FamilySpec) -> Self {
        let seed = pattern::seed(&format!("{}{{i}}{}", spec.head, spec.tail));
        let order = key_order(spec.count, spec.tail.bytes().next());
        Self { spec, seed, order }
    }

    fn key(&self, i: u32) -> String {
        format!("{}{i}{}", self.spec.head, self.spec.tail)
    }

    /// The index of `key`, if it is one of this family's.
    fn index(&self, key: &str) -> Option<u32> {
        let digits = key
            .strip_prefix(&self.spec.head)?
            .strip_suffix(&self.spec.tail)?;
        let canonical = digits == "0" || !digits.starts_with('0');
        let i: u32 = digits
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| digits.parse().ok())
            .flatten()?;
        (canonical && i < self.spec.count).then_some(i)
    }

    /// Object `i`'s size and ETag.
    fn found(&self, i: u32) -> Found {
        let size = self.spec.sizes.of(self.seed, i);
        let tag = pattern::mix(self.seed, u64::from(i));
        Found {
            size,
            etag: format!("\"{tag:016x}{size:016x}\""),
        }
    }

    /// The first place in key order whose key passes `past` (keys that do not pass come
    /// first: `past` is monotone over key order).
    fn seek(&self, past: impl Fn(&str) -> bool) -> usize {
        self.order.partition_point(|&i| !past(&self.key(i)))
    }
}

/// `0..count` ordered by `i` in decimal followed by a tail that begins with `tail_first`
/// (not a digit): a walk of the decimal trie, where a number comes before its extensions
/// when the tail sorts before the digits (or is empty), and after them otherwise.
fn key_order(count: u32, tail_first: Option<u8>) -> Vec<u32> {
    fn visit(x: u32, count: u32, first: bool, out: &mut Vec<u32>) {
        if first {
            out.push(x);
        }
        if x != 0 {
            for d in 0..10 {
                match x.checked_mul(10).and_then(|c| c.checked_add(d)) {
                    Some(c) if c < count => visit(c, count, first, out),
                    _ => break,
                }
            }
        }
        if !first {
            out.push(x);
        }
    }
    let first = tail_first.is_none_or(|b| b < b'0');
    let mut out = Vec::with_capacity(count as usize);
    for root in 0..10.min(count) {
        visit(root, count, first, &mut out);
    }
    out
}

/// What a synthetic object is, apart from its bytes (`slices`) and checksum (`crc`).
#[derive(Debug, Clone)]
pub struct Found {
    /// Bytes in the object.
    pub size: u64,
    /// Quoted, 32 hex digits as an MD5's (S3's ETags are opaque).
    pub etag: String,
}

/// The families of a SPEC, answering lookups and listings.
#[derive(Debug)]
pub struct Synthetic {
    families: Vec<Family>,
}

impl Synthetic {
    /// Builds each family's key order: a second or so per ten million objects.
    pub fn new(spec: &Spec) -> Self {
        Self {
            families: spec.0.iter().cloned().map(Family::new).collect(),
        }
    }

    /// The object at `key`, if the families make one.
    pub fn get(&self, key: &str) -> Option<Found> {
        self.families
            .iter()
            .find_map(|f| f.index(key).map(|i| f.found(i)))
    }

    /// Whether `key` is one of the synthetic objects.
    pub fn contains(&self, key: &str) -> bool {
        self.families.iter().any(|f| f.index(key).is_some())
    }

    /// Cursors over every family's keys from the first that passes `past`, for a listing.
    pub fn cursors(&self, past: &dyn Fn(&str) -> bool) -> Vec<Cursor<'_>> {
        self.families
            .iter()
            .map(|f| Cursor::at(f, f.seek(past)))
            .collect()
    }
}

/// A place in one family's key order, and the key there.
#[derive(Debug)]
pub struct Cursor<'a> {
    family: &'a Family,
    at: usize,
    key: Option<String>,
}

impl<'a> Cursor<'a> {
    fn at(family: &'a Family, at: usize) -> Self {
        let key = family.order.get(at).map(|&i| family.key(i));
        Self { family, at, key }
    }

    /// The key here, or `None` past the last.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The object here (call only while `key` is some).
    pub fn object(&self) -> Found {
        self.family.found(self.family.order[self.at])
    }

    /// Steps to the next key.
    pub fn advance(&mut self) {
        *self = Self::at(self.family, self.at + 1);
    }

    /// Moves on to the first key that passes `past`, never back.
    pub fn skip(&mut self, past: &dyn Fn(&str) -> bool) {
        let to = self.family.seek(past);
        if to > self.at {
            *self = Self::at(self.family, to);
        }
    }
}

/// The bytes of `range` of synthetic object `key`: slices of the pattern's table, never a
/// copy.
pub fn slices(key: &str, range: std::ops::Range<u64>) -> Vec<Bytes> {
    let table = Bytes::from_static(pattern::table());
    pattern::pieces(key, range)
        .map(|(tile, r)| table.slice(tile * TILE + r.start..tile * TILE + r.end))
        .collect()
}

/// The CRC64NVME of the first `len` bytes of `key`, from the tiles' CRCs: appending bytes
/// to a CRC is a GF(2) matrix product per set bit of their length, so an object costs
/// microseconds however large, not a pass over its bytes (and not `checksum_combine`, which
/// rebuilds its matrices on every call).
pub fn crc(key: &str, len: u64) -> Crc {
    let known = known_crcs();
    let table = pattern::table();
    let mut crc = Crc::of(&[]);
    for (tile, r) in pattern::pieces(key, 0..len) {
        let piece = if r.len() == TILE {
            known.tiles[tile]
        } else {
            Crc::of(&table[tile * TILE + r.start..tile * TILE + r.end]).crc
        };
        // CRC64NVME's init and xorout are equal, so appending is linear in the first CRC:
        // crc(a ++ b) = Mᴸ·crc(a) ⊕ crc(b), with Mᴸ the shift by b's L zero bytes.
        crc = Crc {
            crc: known.shift(crc.crc, r.len() as u64) ^ piece,
            len: crc.len + r.len() as u64,
        };
    }
    crc
}

/// The tiles' CRCs, and the shifts by 2ᵏ zero bytes up to a tile's length.
struct KnownCrcs {
    tiles: [u64; TILES],
    /// `by_pow2[k]`: the shift by 2ᵏ zero bytes, by columns.
    by_pow2: [[u64; 64]; SHIFTS],
}

/// Shifts by 1, 2, 4, … bytes up to a tile (2¹⁸ bytes).
const SHIFTS: usize = TILE.trailing_zeros() as usize + 1;

impl KnownCrcs {
    /// `crc` shifted by `len` zero bytes (`len` at most a tile).
    fn shift(&self, crc: u64, len: u64) -> u64 {
        debug_assert!(len <= TILE as u64);
        (0..SHIFTS)
            .filter(|k| len >> k & 1 == 1)
            .fold(crc, |v, k| times(&self.by_pow2[k], v))
    }
}

fn known_crcs() -> &'static KnownCrcs {
    static KNOWN: OnceLock<KnownCrcs> = OnceLock::new();
    KNOWN.get_or_init(|| {
        let table = pattern::table();
        // The shift by one zero byte: column k is the k-th unit vector's.
        let one: [u64; 64] =
            std::array::from_fn(|k| crc_fast::checksum_combine(Crc64Nvme, 1 << k, 0, 1));
        let mut by_pow2 = [one; SHIFTS];
        for k in 1..SHIFTS {
            let m = by_pow2[k - 1];
            by_pow2[k] = std::array::from_fn(|c| times(&m, m[c]));
        }
        KnownCrcs {
            tiles: std::array::from_fn(|t| Crc::of(&table[t * TILE..(t + 1) * TILE]).crc),
            by_pow2,
        }
    })
}

/// The GF(2) product of the matrix `m` (columns) and `v`.
fn times(m: &[u64; 64], mut v: u64) -> u64 {
    let mut out = 0;
    let mut k = 0;
    while v != 0 {
        if v & 1 == 1 {
            out ^= m[k];
        }
        v >>= 1;
        k += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_come_in_byte_order_whatever_follows_the_index() {
        for (template, count) in [
            ("a/{i}", 123),
            ("img_{i}_of_{n}.jpeg", 1001),
            ("x{i}.z", 10),
        ] {
            let spec = Spec::parse(&format!("{template}:{count}x10")).unwrap();
            let s = Synthetic::new(&spec);
            let f = &s.families[0];
            let keys: Vec<String> = f.order.iter().map(|&i| f.key(i)).collect();
            let mut sorted = keys.clone();
            sorted.sort();
            assert_eq!(keys, sorted, "{template}");
            assert_eq!(keys.len(), count);
            for k in &keys {
                assert!(s.get(k).is_some(), "{k}");
            }
        }
    }

    #[test]
    fn only_the_families_keys_are_objects() {
        let s = Synthetic::new(&Spec::parse("d/img_{i}_of_{n}.jpeg:100x7").unwrap());
        assert_eq!(s.get("d/img_99_of_100.jpeg").unwrap().size, 7);
        for k in [
            "d/img_100_of_100.jpeg",
            "d/img_07_of_100.jpeg",
            "d/img_x_of_100.jpeg",
            "d/img__of_100.jpeg",
        ] {
            assert!(s.get(k).is_none(), "{k}");
        }
    }

    #[test]
    fn drawn_sizes_are_stable_and_spread_around_the_mean() {
        let spec = Spec::parse("u/{i}.npz:20000x146600628±68341808").unwrap();
        let s = Synthetic::new(&spec);
        let sizes: Vec<u64> = (0..20000)
            .map(|i| s.get(&format!("u/{i}.npz")).unwrap().size)
            .collect();
        let again = Synthetic::new(&spec);
        assert_eq!(again.get("u/17.npz").unwrap().size, sizes[17]);
        let mean = sizes.iter().sum::<u64>() as f64 / sizes.len() as f64;
        assert!((mean / 146_600_628.0 - 1.0).abs() < 0.02, "{mean}");
        assert!(sizes.iter().all(|&n| n >= 1));
        let sd = (sizes
            .iter()
            .map(|&n| (n as f64 - mean).powi(2))
            .sum::<f64>()
            / sizes.len() as f64)
            .sqrt();
        assert!((sd / 68_341_808.0 - 1.0).abs() < 0.05, "{sd}");
    }

    #[test]
    fn the_crc_is_the_crc_of_the_bytes() {
        for len in [0, 1, 1000, 131_072, TILE as u64 - 3, TILE as u64 * 3 + 17] {
            let key = format!("obj{len}");
            let bytes: Vec<u8> = slices(&key, 0..len).concat();
            assert_eq!(bytes, pattern::generate(&key, len as usize));
            assert_eq!(crc(&key, len), Crc::of(&bytes), "{len}");
        }
    }

    #[test]
    fn bad_specs_name_what_is_wrong() {
        for (spec, says) in [
            ("train/img.jpeg:10x5", "neither a template with {i}"),
            ("a_{n}:10x5", "no {i}"),
            ("a{i}b{i}:10x5", "more than once"),
            ("a{i}0:10x5", "digit right after"),
            ("a{i}:0x5", "between 1 and"),
            ("a{i}:4294967296x5", "between 1 and"),
            ("a{i}:10x0", "is 0"),
            ("a{i}:10xbig", "size \"big\""),
            ("a{i}:10", "COUNTxSIZE"),
            ("imagenet", "neither a template"),
            ("retinanet:many", "count \"many\""),
            ("", "empty family"),
        ] {
            let e = Spec::parse(spec).unwrap_err();
            assert!(e.contains(says) && e.contains("e.g."), "{spec}: {e}");
        }
        let r = Spec::parse("retinanet:200000, unet3d").unwrap();
        assert_eq!(r.objects(), 207_200);
    }
}
