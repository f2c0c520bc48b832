//! Paginated listings as one stream, for backends that page through ListObjectsV2 themselves.

use crate::error::{Error, Result};
use crate::object::ListEntry;
use crate::retry::{RetryPolicy, retry};
use futures::stream::BoxStream;
use futures::{Future, StreamExt};

/// One page of a listing and where the next one starts: `T` the entries, `K` the token
/// the next page is asked with.
#[derive(Debug)]
pub struct Page<T, K = String> {
    /// The page's entries, in the order the server sent them.
    pub entries: Vec<T>,
    /// Where the next page starts; `None` on the last page (`new` drops a token sent with
    /// a page that is not truncated).
    pub next_token: Option<K>,
    /// What is being listed, for errors about the sequence of pages.
    subject: String,
}

/// One ListObjectsV2 page: objects and common prefixes, and the continuation token.
pub type ListPage = Page<ListEntry>;

/// One ListObjectsV2 request beyond its prefix (per-operation parameters).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// Every key under the prefix; `false` groups keys below the next `/` into prefixes.
    pub recursive: bool,
    /// Where this page starts: the previous page's continuation token (`None`: the first).
    pub token: Option<String>,
    /// At most this many entries (S3 sends at most 1,000, and that by default).
    pub max_keys: Option<u32>,
    /// Only keys after this one (S3's `start-after`; a token already says where to go on).
    pub start_after: Option<String>,
}

impl ListOptions {
    /// Every page of a plain listing: from `token`, the store's page size.
    pub fn from(recursive: bool, token: Option<String>) -> Self {
        Self {
            recursive,
            token,
            ..Self::default()
        }
    }
}

/// A multipart upload in progress: begun, neither completed nor aborted. Its parts are
/// stored (and billed) but no object is visible; a writer killed mid-upload leaves one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    /// The object it would create.
    pub uri: crate::uri::ObjectUri,
    /// The store's name for it, which completing or aborting it takes.
    pub upload_id: String,
    /// When it began, as the store reports it.
    pub initiated: Option<std::time::SystemTime>,
}

/// Where a ListMultipartUploads page starts: after this key and upload ID.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UploadMarker {
    /// The last key of the previous page (`NextKeyMarker`).
    pub key: String,
    /// The last upload ID of that key on the previous page (`NextUploadIdMarker`).
    pub upload_id: String,
}

/// One ListMultipartUploads page.
pub type UploadsPage = Page<Upload, UploadMarker>;

impl<T, K> Page<T, K> {
    /// A page from a listing reply. A truncated page that names no next page would end the
    /// listing early and silently; it is an error naming `subject`.
    pub fn new(
        subject: &str,
        entries: Vec<T>,
        is_truncated: bool,
        next_token: Option<K>,
    ) -> Result<Self> {
        if is_truncated && next_token.is_none() {
            return Err(Error::transport(
                subject,
                "listing is truncated but has no continuation token",
            ));
        }
        Ok(Self {
            entries,
            next_token: next_token.filter(|_| is_truncated),
            subject: subject.to_owned(),
        })
    }
}

/// The continuation tokens a listing has followed. A store that hands one out twice would
/// have the listing loop for ever.
#[derive(Debug)]
pub(crate) struct Tokens<K>(std::collections::HashSet<K>);

impl<K: Clone + Eq + std::hash::Hash + std::fmt::Debug> Tokens<K> {
    pub(crate) fn new() -> Self {
        Self(Default::default())
    }

    /// Notes that `token` is followed next; an integrity error naming `subject` if it was
    /// followed before.
    pub(crate) fn follow(&mut self, subject: &str, token: &K) -> Result<()> {
        if self.0.insert(token.clone()) {
            return Ok(());
        }
        Err(Error::integrity(
            subject.to_owned(),
            format!("the listing repeated the continuation token {token:?}: it would never end"),
        ))
    }
}

/// Streams every page's entries in order; `fetch(token)` makes one attempt at one page
/// (`None`: the first) and is retried under `policy`. The first error ends the stream. A
/// continuation token handed out twice is an error: following it would loop for ever.
pub(crate) fn paginate<'a, T, K, F, Fut>(
    policy: &'a RetryPolicy,
    fetch: F,
) -> BoxStream<'a, Result<T>>
where
    T: Send + 'a,
    K: Clone + Eq + std::hash::Hash + std::fmt::Debug + Send + Sync + 'a,
    F: Fn(Option<K>) -> Fut + Send + Sync + 'a,
    Fut: Future<Output = Result<Page<T, K>>> + Send + 'a,
{
    let fetch = std::sync::Arc::new(fetch);
    // State: None = done; Some(token) = the next page to fetch (first page: Some(None)).
    futures::stream::try_unfold(
        (Some(None::<K>), Tokens::new()),
        move |(state, mut seen)| {
            let fetch = fetch.clone();
            async move {
                let Some(token) = state else { return Ok(None) };
                let page = retry(policy, || fetch(token.clone())).await?;
                if let Some(t) = &page.next_token {
                    seen.follow(&page.subject, t)?;
                }
                let next = page.next_token.map(Some);
                Ok(Some((
                    futures::stream::iter(page.entries.into_iter().map(Ok)),
                    (next, seen),
                )))
            }
        },
    )
    .map(|r| match r {
        Ok(page) => page.boxed(),
        Err(e) => futures::stream::iter([Err(e)]).boxed(),
    })
    .flatten()
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ObjectUri;
    use futures::TryStreamExt;
    use std::sync::Mutex;
    use std::time::Duration;

    fn entry(i: u32) -> ListEntry {
        ListEntry::Prefix(format!("s3://bkt/p{i}/").parse::<ObjectUri>().unwrap())
    }

    #[tokio::test]
    async fn pages_follow_tokens_and_retry() {
        let policy = RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(1),
        };
        let calls = Mutex::new(Vec::new());
        let fails = Mutex::new(1);
        let got: Vec<ListEntry> = paginate(&policy, |token: Option<String>| {
            calls.lock().unwrap().push(token.clone());
            let fail = std::mem::replace(&mut *fails.lock().unwrap(), 0) == 1;
            async move {
                if fail {
                    return Err(Error::transport("s3://bkt/", "reset"));
                }
                match token.as_deref() {
                    None => ListPage::new(
                        "s3://bkt/",
                        vec![entry(0), entry(1)],
                        true,
                        Some("t1".into()),
                    ),
                    Some("t1") => {
                        ListPage::new("s3://bkt/", vec![entry(2)], false, Some("ignored".into()))
                    }
                    Some(t) => panic!("unexpected token {t}"),
                }
            }
        })
        .try_collect()
        .await
        .unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[2].uri().key(), "p2/");
        assert_eq!(*calls.lock().unwrap(), [None, None, Some("t1".to_owned())]);
        let err = ListPage::new("s3://bkt/x", vec![], true, None).unwrap_err();
        assert!(err.to_string().contains("s3://bkt/x"), "{err}");

        // A server that hands out the same token again would loop the listing for ever.
        let pages = Mutex::new(0);
        let out: Vec<Result<ListEntry>> = paginate(&policy, |_token: Option<String>| {
            *pages.lock().unwrap() += 1;
            async { ListPage::new("s3://bkt/loop/", vec![entry(0)], true, Some("same".into())) }
        })
        .collect()
        .await;
        assert_eq!(*pages.lock().unwrap(), 2, "stopped at the repeat");
        let err = out.last().unwrap().as_ref().unwrap_err();
        assert!(matches!(err, Error::Integrity { .. }), "{err}");
        assert!(err.to_string().contains("s3://bkt/loop/"), "{err}");
    }
}
