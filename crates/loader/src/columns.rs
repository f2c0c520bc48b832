//! A dataset's items kept compact. A listing of millions of objects held as `Item`s costs
//! about 200 bytes an object (a URI of two strings, an `Option<u64>`, an ETag string, and
//! their heap blocks); here an object costs its key's bytes and 32 more: an offset, a size
//! and the ETag's 16 bytes. Items are rebuilt one at a time as they are read.

use crate::item::Item;
use sluice_core::ObjectUri;
use std::collections::HashMap;

/// Items in order, column by column.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Columns {
    /// Runs of items in one bucket: the first item of the run, and the scheme and bucket as
    /// a URI with an empty key. A dataset rarely spans more than one.
    roots: Vec<(usize, ObjectUri)>,
    /// Every key, one after the other: item `i`'s is `keys[ends[i - 1]..ends[i]]`.
    keys: String,
    ends: Vec<u64>,
    /// Sizes in bytes (0 where not known), and which are known, a bit an item: a hostile
    /// listing's size may be any `u64`, so no value can stand for "unknown".
    sizes: Vec<u64>,
    known: Vec<u64>,
    etags: Etags,
}

impl Columns {
    pub(crate) fn with_capacity(items: usize) -> Self {
        Self {
            ends: Vec::with_capacity(items),
            sizes: Vec::with_capacity(items),
            known: Vec::with_capacity(items.div_ceil(64)),
            ..Self::default()
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(crate) fn push(&mut self, uri: &ObjectUri, size: Option<u64>, etag: Option<&str>) {
        let i = self.len();
        let same_root = self
            .roots
            .last()
            .is_some_and(|(_, r)| r.scheme() == uri.scheme() && r.bucket() == uri.bucket());
        if !same_root {
            self.roots.push((i, uri.with_key(String::new())));
        }
        self.keys.push_str(uri.key());
        self.ends.push(self.keys.len() as u64);
        self.push_size(size);
        self.etags
            .push(i, etag.map_or(EtagRef::None, EtagRef::parse));
    }

    /// Adds `other`'s items after these.
    pub(crate) fn append(&mut self, other: &Columns) {
        let (base, key_base) = (self.len(), self.keys.len() as u64);
        for (first, root) in &other.roots {
            let same = *first == 0 && self.roots.last().is_some_and(|(_, r)| r == root);
            if !same {
                self.roots.push((base + first, root.clone()));
            }
        }
        self.keys.push_str(&other.keys);
        self.ends.extend(other.ends.iter().map(|e| e + key_base));
        for j in 0..other.len() {
            self.push_size(other.size(j));
            self.etags.push(base + j, other.etags.get(j));
        }
    }

    fn push_size(&mut self, size: Option<u64>) {
        let i = self.sizes.len();
        if i.is_multiple_of(64) {
            self.known.push(0);
        }
        self.sizes.push(size.unwrap_or(0));
        if size.is_some() {
            self.known[i / 64] |= 1 << (i % 64);
        }
    }

    /// Gives back what growing left unused: the columns are kept for the whole job.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.keys.shrink_to_fit();
        self.ends.shrink_to_fit();
        self.sizes.shrink_to_fit();
        self.known.shrink_to_fit();
        self.etags.md5.shrink_to_fit();
    }

    pub(crate) fn key(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.keys[start as usize..self.ends[i] as usize]
    }

    pub(crate) fn size(&self, i: usize) -> Option<u64> {
        (self.known[i / 64] & (1 << (i % 64)) != 0).then(|| self.sizes[i])
    }

    pub(crate) fn uri(&self, i: usize) -> ObjectUri {
        let run = self.roots.partition_point(|(first, _)| *first <= i) - 1;
        self.roots[run].1.with_key(self.key(i))
    }

    pub(crate) fn item(&self, i: usize) -> Item {
        Item {
            uri: self.uri(i),
            size: self.size(i),
            etag: self.etags.get(i).to_owned(),
        }
    }

    /// Bytes these columns hold on the heap (their capacities): what a dataset costs.
    pub(crate) fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        let etags = &self.etags;
        self.roots.capacity() * size_of::<(usize, ObjectUri)>()
            + self.keys.capacity()
            + self.ends.capacity() * size_of::<u64>()
            + self.sizes.capacity() * size_of::<u64>()
            + self.known.capacity() * size_of::<u64>()
            + etags.md5.capacity() * size_of::<[u8; 16]>()
            + etags.other.capacity() * size_of::<(usize, Option<Box<str>>)>()
            + etags
                .other
                .values()
                .flatten()
                .map(|s| s.len())
                .sum::<usize>()
    }
}

/// The items' ETags. Most are S3's quoted MD5 (`"9e107d9d372bb6826bd81d3542a419d6"`), kept
/// as its 16 bytes; any other form (a multipart upload's `"…-3"`, another store's) and an
/// item without one after the first that had one are kept aside by index. A dataset of URIs
/// alone holds nothing here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Etags {
    /// Items before this one have no ETag; the columns below start here.
    start: usize,
    /// One per item from `start` on: its MD5, or zeros where `other` holds it.
    md5: Vec<[u8; 16]>,
    other: HashMap<usize, Option<Box<str>>>,
}

/// One ETag, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EtagRef<'a> {
    None,
    Md5([u8; 16]),
    Other(&'a str),
}

impl<'a> EtagRef<'a> {
    fn parse(s: &'a str) -> Self {
        let mut md5 = [0u8; 16];
        let hex = s
            .strip_prefix('"')
            .and_then(|s| s.strip_suffix('"'))
            .filter(|h| h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
        match hex.map(|h| hex::decode_to_slice(h, &mut md5)) {
            Some(Ok(())) => Self::Md5(md5),
            _ => Self::Other(s),
        }
    }

    fn to_owned(self) -> Option<String> {
        match self {
            Self::None => None,
            Self::Md5(b) => Some(format!("\"{}\"", hex::encode(b))),
            Self::Other(s) => Some(s.to_owned()),
        }
    }
}

impl Etags {
    /// Item `i`'s ETag; items come in order.
    fn push(&mut self, i: usize, etag: EtagRef<'_>) {
        if self.md5.is_empty() && self.other.is_empty() {
            if etag == EtagRef::None {
                self.start = i + 1;
                return;
            }
            self.start = i;
        }
        match etag {
            EtagRef::Md5(b) => self.md5.push(b),
            EtagRef::None => {
                self.md5.push([0; 16]);
                self.other.insert(i, None);
            }
            EtagRef::Other(s) => {
                self.md5.push([0; 16]);
                self.other.insert(i, Some(s.into()));
            }
        }
    }

    fn get(&self, i: usize) -> EtagRef<'_> {
        if i < self.start {
            return EtagRef::None;
        }
        match self.other.get(&i) {
            Some(Some(s)) => EtagRef::Other(s),
            Some(None) => EtagRef::None,
            None => EtagRef::Md5(self.md5[i - self.start]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn uri(s: &str) -> ObjectUri {
        ObjectUri::parse(s).unwrap()
    }

    fn etag() -> impl Strategy<Value = Option<String>> {
        prop_oneof![
            Just(None),
            "[0-9a-f]{32}".prop_map(|h| Some(format!("\"{h}\""))),
            "[0-9A-F]{32}".prop_map(|h| Some(format!("\"{h}\""))),
            "[0-9a-f]{32}-[1-9]".prop_map(|h| Some(format!("\"{h}\""))),
            "[ -~]{0,40}".prop_map(Some),
        ]
    }

    fn item() -> impl Strategy<Value = Item> {
        let root = prop_oneof![
            Just("s3://bkt/"),
            Just("s3://other/"),
            Just("file:///data/")
        ];
        (
            root,
            "[a-z0-9/_.]{1,30}",
            proptest::option::of(0u64..1 << 40),
            etag(),
        )
            .prop_map(|(root, key, size, etag)| Item {
                uri: uri(&format!("{root}{key}")),
                size,
                etag,
            })
    }

    proptest! {
        /// Every item comes back as pushed, whatever the mix of buckets, sizes and ETags,
        /// pushed one by one or appended in parts.
        #[test]
        fn items_come_back_as_pushed(items in proptest::collection::vec(item(), 0..200), cut in 0usize..200) {
            let mut whole = Columns::default();
            for i in &items {
                whole.push(&i.uri, i.size, i.etag.as_deref());
            }
            let cut = cut.min(items.len());
            let (mut a, mut b) = (Columns::default(), Columns::default());
            for i in &items[..cut] {
                a.push(&i.uri, i.size, i.etag.as_deref());
            }
            for i in &items[cut..] {
                b.push(&i.uri, i.size, i.etag.as_deref());
            }
            a.append(&b);
            for cols in [&whole, &a] {
                prop_assert_eq!(cols.len(), items.len());
                for (n, i) in items.iter().enumerate() {
                    prop_assert_eq!(&cols.item(n), i);
                }
            }
        }
    }

    /// A listed retinanet-sized dataset costs its keys and at most 36 bytes more an object.
    #[test]
    fn a_listed_object_costs_its_key_and_32_bytes() {
        let n = 100_000;
        let mut cols = Columns::with_capacity(n);
        let mut key_bytes = 0;
        for i in 0..n {
            let u = uri(&format!("s3://bkt/train/img_{i}_of_1170301.jpeg"));
            key_bytes += u.key().len();
            let etag = format!("\"{:032x}\"", i as u128 * 0x9e37_79b9_7f4a_7c15);
            cols.push(&u, Some(322_957), Some(&etag));
        }
        cols.shrink_to_fit();
        let per_object = (cols.heap_bytes() - key_bytes) as f64 / n as f64;
        assert!(
            per_object <= 36.0,
            "{per_object} bytes an object besides its key"
        );
        let total = cols.heap_bytes() as f64 / n as f64;
        assert!(total <= 100.0, "{total} bytes an object");
    }

    #[test]
    fn uris_alone_hold_no_etags() {
        let mut cols = Columns::default();
        for i in 0..1000 {
            cols.push(&uri(&format!("s3://bkt/k{i}")), None, None);
        }
        assert!(cols.etags.md5.is_empty() && cols.etags.other.is_empty());
        assert_eq!(cols.item(999).etag, None);
        assert_eq!(cols.size(3), None);
    }
}
