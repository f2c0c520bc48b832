//! ListObjectsV2 pages over a bucket's stored objects and its synthetic ones, merged in key
//! order. A page costs a few lookups per key returned and one seek per common prefix, never
//! a walk over the keys a common prefix stands for, so a bucket of ten million synthetic
//! keys lists as fast as one of ten.

use crate::synthetic::{Cursor, Synthetic};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::time::SystemTime;

/// What a listing says of a stored object.
pub(crate) trait Entry {
    fn size(&self) -> u64;
    /// Quoted, as S3 sends it.
    fn etag(&self) -> &str;
    fn last_modified(&self) -> SystemTime;
}

/// One object of a page.
#[derive(Debug, Clone)]
pub(crate) struct Listed {
    pub key: String,
    pub size: u64,
    /// Quoted, as S3 sends it.
    pub etag: String,
    pub last_modified: SystemTime,
}

/// One ListObjectsV2 page.
#[derive(Debug)]
pub(crate) struct Page {
    pub objects: Vec<Listed>,
    pub prefixes: Vec<String>,
    /// Continuation token (`After::token`), when more remain.
    pub next: Option<String>,
}

/// Where the caller's listing resumes: after a key (`StartAfter`, or a page that ended on
/// one), or after a common prefix and every key under it. A continuation token says which,
/// as a key may itself end with the delimiter (`dir/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum After<'a> {
    Key(&'a str),
    Prefix(&'a str),
}

impl<'a> After<'a> {
    /// The token for a page that ended here.
    fn token(self) -> String {
        match self {
            After::Key(k) => format!("k{k}"),
            After::Prefix(p) => format!("p{p}"),
        }
    }

    /// The place a continuation token names; `None` if it is not one of ours.
    pub(crate) fn from_token(token: &'a str) -> Option<Self> {
        if let Some(k) = token.strip_prefix('k') {
            Some(After::Key(k))
        } else {
            token.strip_prefix('p').map(After::Prefix)
        }
    }
}

/// The next key in order: a stored object, or one a synthetic cursor makes.
enum Next<'a, E> {
    Kept(&'a String, &'a E),
    Made(usize, String),
}

/// Where a listing stands: keys at or before it are done.
struct Position<'a> {
    prefix: &'a str,
    /// The last key or common prefix returned (or the caller's token).
    after: Option<String>,
    /// `after` is a common prefix: every key under it is done too.
    skip_under: bool,
}

impl Position<'_> {
    /// Whether `key` is still to come. False then true over keys in order, so a sorted
    /// source can seek to the first key it holds true for.
    fn ahead(&self, key: &str) -> bool {
        key >= self.prefix
            && self
                .after
                .as_deref()
                .is_none_or(|a| key > a && !(self.skip_under && key.starts_with(a)))
    }
}

/// One ListObjectsV2 page. A common prefix counts as one entry, as on S3.
pub(crate) fn page<E: Entry>(
    stored: &BTreeMap<String, E>,
    synthetic: Option<(&Synthetic, SystemTime)>,
    prefix: &str,
    delimiter: Option<&str>,
    after: Option<After<'_>>,
    max: usize,
) -> Page {
    let mut page = Page {
        objects: Vec::new(),
        prefixes: Vec::new(),
        next: None,
    };
    let mut at = Position {
        prefix,
        after: after.map(|(After::Key(a) | After::Prefix(a))| a.to_owned()),
        skip_under: matches!(after, Some(After::Prefix(_))),
    };
    let mut cursors: Vec<Cursor<'_>> = synthetic
        .map(|(s, _)| s.cursors(&|k| at.ahead(k)))
        .unwrap_or_default();
    loop {
        let from = at
            .after
            .as_deref()
            .map_or(Bound::Included(prefix), Bound::Excluded);
        let kept = stored
            .range::<str, _>((from, Bound::Unbounded))
            .find(|(k, _)| at.ahead(k));
        let made = cursors
            .iter()
            .enumerate()
            .filter_map(|(n, c)| c.key().map(|k| (n, k)))
            .min_by(|a, b| a.1.cmp(b.1))
            .map(|(n, k)| (n, k.to_owned()));
        let next = match (kept, made) {
            (None, None) => break,
            (Some((k, o)), Some((n, m))) => {
                if m < *k {
                    Next::Made(n, m)
                } else {
                    Next::Kept(k, o)
                }
            }
            (Some((k, o)), None) => Next::Kept(k, o),
            (None, Some((n, m))) => Next::Made(n, m),
        };
        let key = match &next {
            Next::Kept(k, _) => k.as_str(),
            Next::Made(_, m) => m.as_str(),
        };
        if !key.starts_with(prefix) {
            break;
        }
        if page.objects.len() + page.prefixes.len() == max {
            page.next = at.after.as_deref().map(|a| {
                if at.skip_under {
                    After::Prefix(a).token()
                } else {
                    After::Key(a).token()
                }
            });
            break;
        }
        let under = delimiter.and_then(|d| {
            key[prefix.len()..]
                .find(d)
                .map(|i| prefix.len() + i + d.len())
        });
        if let Some(end) = under {
            let cp = key[..end].to_owned();
            page.prefixes.push(cp.clone());
            at.after = Some(cp);
            at.skip_under = true;
            for c in &mut cursors {
                c.skip(&|k| at.ahead(k));
            }
            continue;
        }
        let listed = match next {
            Next::Kept(k, o) => Listed {
                key: k.clone(),
                size: o.size(),
                etag: o.etag().to_owned(),
                last_modified: o.last_modified(),
            },
            Next::Made(n, key) => {
                let found = cursors[n].object();
                cursors[n].advance();
                Listed {
                    key,
                    size: found.size,
                    etag: found.etag,
                    last_modified: synthetic.map_or(SystemTime::UNIX_EPOCH, |s| s.1),
                }
            }
        };
        at.after = Some(listed.key.clone());
        at.skip_under = false;
        page.objects.push(listed);
    }
    page
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::Spec;

    /// A stored object of one byte.
    struct One;

    impl Entry for One {
        fn size(&self) -> u64 {
            1
        }
        fn etag(&self) -> &str {
            "\"1\""
        }
        fn last_modified(&self) -> SystemTime {
            SystemTime::UNIX_EPOCH
        }
    }

    fn stored(keys: &[&str]) -> BTreeMap<String, One> {
        keys.iter().map(|k| (k.to_string(), One)).collect()
    }

    fn all_pages(
        objs: &BTreeMap<String, One>,
        synthetic: Option<&Synthetic>,
        prefix: &str,
        delim: Option<&str>,
        max: usize,
    ) -> (Vec<String>, Vec<String>, usize) {
        let (mut keys, mut cps, mut pages) = (vec![], vec![], 0);
        let mut token: Option<String> = None;
        loop {
            let s = synthetic.map(|s| (s, SystemTime::UNIX_EPOCH));
            let after = token.as_deref().map(|t| After::from_token(t).unwrap());
            let p = page(objs, s, prefix, delim, after, max);
            pages += 1;
            keys.extend(p.objects.into_iter().map(|o| o.key));
            cps.extend(p.prefixes);
            match p.next {
                Some(t) => token = Some(t),
                None => return (keys, cps, pages),
            }
        }
    }

    #[test]
    fn paginates_without_loss_or_repeat() {
        let keys: Vec<String> = (0..25).map(|i| format!("p/{i:03}")).collect();
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let (objs, cps, pages) = all_pages(&stored(&refs), None, "p/", None, 10);
        assert_eq!(objs, keys);
        assert!(cps.is_empty());
        assert_eq!(pages, 3);
    }

    #[test]
    fn delimiter_groups_and_pages_over_prefixes() {
        let s = stored(&["a/1", "a/2", "b/1", "c", "d/x/1", "d/y", "e"]);
        let (objs, cps, _) = all_pages(&s, None, "", Some("/"), 2);
        assert_eq!(objs, vec!["c", "e"]);
        assert_eq!(cps, vec!["a/", "b/", "d/"]);
        let (objs, cps, _) = all_pages(&s, None, "d/", Some("/"), 1);
        assert_eq!(objs, vec!["d/y"]);
        assert_eq!(cps, vec!["d/x/"]);
    }

    /// Stored and synthetic keys interleave as one sorted bucket would list them, with any
    /// page size, prefix and delimiter.
    #[test]
    fn synthetic_and_stored_keys_list_as_one_bucket() {
        let spec = Spec::parse("t/a/img_{i}_of_{n}.jpeg:120x10, t/b/{i}.npz:30x5").unwrap();
        let synthetic = Synthetic::new(&spec);
        let stored_keys = [
            "t/a/img_5_of_120.jpeg.bak",
            "t/a0",
            "t/b/",
            "t/c/x",
            "a",
            "z",
        ];
        let objs = stored(&stored_keys);
        let mut every: Vec<String> = (0..120)
            .map(|i| format!("t/a/img_{i}_of_120.jpeg"))
            .chain((0..30).map(|i| format!("t/b/{i}.npz")))
            .chain(stored_keys.iter().map(|k| k.to_string()))
            .collect();
        every.sort();
        for (prefix, delim) in [
            ("", None),
            ("t/", None),
            ("t/a/img_1", None),
            ("", Some("/")),
            ("t/", Some("/")),
            ("t/b/", Some("/")),
        ] {
            let under: Vec<&String> = every.iter().filter(|k| k.starts_with(prefix)).collect();
            let mut want_keys = Vec::new();
            let mut want_cps: Vec<String> = Vec::new();
            for k in under {
                match delim.and_then(|d| {
                    k[prefix.len()..]
                        .find(d)
                        .map(|i| prefix.len() + i + d.len())
                }) {
                    Some(end) => {
                        if want_cps.last().is_none_or(|c| c != &k[..end]) {
                            want_cps.push(k[..end].to_owned());
                        }
                    }
                    None => want_keys.push(k.clone()),
                }
            }
            for max in [1, 7, 1000] {
                let (keys, cps, _) = all_pages(&objs, Some(&synthetic), prefix, delim, max);
                assert_eq!(keys, want_keys, "{prefix:?} {delim:?} {max}");
                assert_eq!(cps, want_cps, "{prefix:?} {delim:?} {max}");
            }
        }
    }
}
