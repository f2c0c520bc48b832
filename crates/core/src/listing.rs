//! Paginated listings as one stream, for backends that page through ListObjectsV2 themselves.

use crate::error::{Error, Result};
use crate::retry::{RetryPolicy, retry};
use crate::store::ListEntry;
use futures::stream::BoxStream;
use futures::{Future, StreamExt};

/// One page of a listing and where the next one starts.
#[derive(Debug)]
pub struct ListPage {
    pub entries: Vec<ListEntry>,
    pub next_token: Option<String>,
}

impl ListPage {
    /// A page from a ListObjectsV2 reply. A truncated page without a continuation token
    /// would end the listing early and silently; it is an error naming `subject`.
    pub fn new(
        subject: &str,
        entries: Vec<ListEntry>,
        is_truncated: bool,
        next_token: Option<String>,
    ) -> Result<Self> {
        match (is_truncated, next_token) {
            (true, None) => Err(Error::transport(
                subject,
                "listing is truncated but has no continuation token",
            )),
            (true, t) => Ok(Self {
                entries,
                next_token: t,
            }),
            (false, _) => Ok(Self {
                entries,
                next_token: None,
            }),
        }
    }
}

/// Streams every page's entries in order; `fetch(token)` makes one attempt at one page
/// (`None`: the first) and is retried under `policy`. The first error ends the stream.
pub fn paginate<'a, F, Fut>(policy: &'a RetryPolicy, fetch: F) -> BoxStream<'a, Result<ListEntry>>
where
    F: Fn(Option<String>) -> Fut + Send + Sync + 'a,
    Fut: Future<Output = Result<ListPage>> + Send + 'a,
{
    let fetch = std::sync::Arc::new(fetch);
    // State: None = done; Some(token) = the next page to fetch (first page: Some(None)).
    futures::stream::try_unfold(Some(None::<String>), move |state| {
        let fetch = fetch.clone();
        async move {
            let Some(token) = state else { return Ok(None) };
            let page = retry(policy, || fetch(token.clone())).await?;
            let next = page.next_token.map(Some);
            Ok(Some((
                futures::stream::iter(page.entries.into_iter().map(Ok)),
                next,
            )))
        }
    })
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
    }
}
