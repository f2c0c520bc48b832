//! Multipart upload, once for every backend that speaks the S3 multipart API itself: cut the
//! payload into parts (zero-copy slices), upload a few at a time with retries, complete, and
//! abort if anything fails so no orphaned parts keep costing storage.

use crate::error::{Error, Result};
use crate::retry::{RetryPolicy, retry};
use crate::store::PutInfo;
use crate::uri::ObjectUri;
use async_trait::async_trait;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};

/// Parts uploaded at once per object. Enough to fill a link from one object; the loader and
/// CLI parallelise across objects on top of this.
pub const PART_CONCURRENCY: usize = 4;

/// The four calls of the S3 multipart API, as a backend makes them (one attempt each).
#[async_trait]
pub trait MultipartApi: Send + Sync {
    async fn create_upload(&self, uri: &ObjectUri) -> Result<String>;
    /// Returns the ETag the response carried; `upload` turns a missing one into an error.
    async fn upload_part(
        &self,
        uri: &ObjectUri,
        upload_id: &str,
        part_number: u32,
        data: Bytes,
    ) -> Result<Option<String>>;
    /// `parts`: (part number, ETag) in order. Returns the object's ETag.
    async fn complete_upload(
        &self,
        uri: &ObjectUri,
        upload_id: &str,
        parts: &[(u32, String)],
    ) -> Result<Option<String>>;
    async fn abort_upload(&self, uri: &ObjectUri, upload_id: &str) -> Result<()>;
}

/// Uploads `data` as parts of `part_size` bytes (the last shorter).
pub async fn upload(
    api: &dyn MultipartApi,
    policy: &RetryPolicy,
    uri: &ObjectUri,
    data: Bytes,
    part_size: u64,
) -> Result<PutInfo> {
    let part_size = usize::try_from(part_size.max(1)).unwrap_or(usize::MAX);
    let upload_id = retry(policy, || api.create_upload(uri)).await?;
    let parts: Vec<(u32, Bytes)> = data
        .chunks(part_size)
        .enumerate()
        .map(|(i, c)| (i as u32 + 1, data.slice_ref(c)))
        .collect();
    let uploaded: Result<Vec<(u32, String)>> = futures::stream::iter(parts)
        .map(|(n, chunk)| {
            let upload_id = upload_id.as_str();
            async move {
                let etag = retry(policy, || async {
                    api.upload_part(uri, upload_id, n, chunk.clone())
                        .await?
                        .ok_or_else(|| {
                            Error::transport(
                                uri.to_string(),
                                format!("UploadPart {n} answered without an ETag"),
                            )
                        })
                })
                .await?;
                Ok((n, etag))
            }
        })
        .buffered(PART_CONCURRENCY)
        .try_collect()
        .await;
    let result = match uploaded {
        Ok(parts) => retry(policy, || api.complete_upload(uri, &upload_id, &parts))
            .await
            .map(|etag| PutInfo {
                etag,
                parts: Some(parts.len()),
            }),
        Err(e) => Err(e),
    };
    if result.is_err()
        && let Err(abort) = api.abort_upload(uri, &upload_id).await
    {
        tracing::warn!(%uri, upload_id, error = %abort, "could not abort failed multipart upload");
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::time::Duration;

    #[derive(Default)]
    struct Fake {
        parts: Mutex<Vec<(u32, Bytes)>>,
        fail_part: Option<u32>,
        no_etag_part: Option<u32>,
        aborted: Mutex<bool>,
        completed: Mutex<Vec<(u32, String)>>,
    }

    #[async_trait]
    impl MultipartApi for Fake {
        async fn create_upload(&self, _: &ObjectUri) -> Result<String> {
            Ok("u1".into())
        }
        async fn upload_part(
            &self,
            uri: &ObjectUri,
            _: &str,
            n: u32,
            data: Bytes,
        ) -> Result<Option<String>> {
            if self.fail_part == Some(n) {
                return Err(Error::from_service(
                    uri.to_string(),
                    400,
                    "InvalidArgument",
                    "bad part",
                    None,
                ));
            }
            self.parts.lock().unwrap().push((n, data));
            Ok((self.no_etag_part != Some(n)).then(|| format!("\"etag{n}\"")))
        }
        async fn complete_upload(
            &self,
            _: &ObjectUri,
            _: &str,
            parts: &[(u32, String)],
        ) -> Result<Option<String>> {
            *self.completed.lock().unwrap() = parts.to_vec();
            Ok(Some("\"final-3\"".into()))
        }
        async fn abort_upload(&self, _: &ObjectUri, _: &str) -> Result<()> {
            *self.aborted.lock().unwrap() = true;
            Ok(())
        }
    }

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 2,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(1),
        }
    }

    #[tokio::test]
    async fn parts_are_zero_copy_slices_completed_in_order() {
        let fake = Fake::default();
        let data = Bytes::from((0..25u8).collect::<Vec<_>>());
        let uri = ObjectUri::parse("s3://bucket/k").unwrap();
        let info = upload(&fake, &policy(), &uri, data.clone(), 10)
            .await
            .unwrap();
        assert_eq!(info.parts, Some(3));
        let mut parts = fake.parts.lock().unwrap().clone();
        parts.sort_by_key(|p| p.0);
        assert_eq!(
            parts.iter().map(|p| p.1.len()).collect::<Vec<_>>(),
            vec![10, 10, 5]
        );
        assert_eq!(parts[1].1.as_ptr(), data[10..].as_ptr(), "no copy");
        let done = fake.completed.lock().unwrap().clone();
        assert_eq!(done.iter().map(|p| p.0).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert!(!*fake.aborted.lock().unwrap());
    }

    #[tokio::test]
    async fn a_failed_part_aborts_the_upload() {
        let fake = Fake {
            fail_part: Some(2),
            ..Default::default()
        };
        let uri = ObjectUri::parse("s3://bucket/k").unwrap();
        let err = upload(&fake, &policy(), &uri, Bytes::from(vec![0; 30]), 10)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("InvalidArgument"), "{err}");
        assert!(*fake.aborted.lock().unwrap());
    }

    #[tokio::test]
    async fn a_part_without_etag_fails_the_upload_naming_it() {
        let fake = Fake {
            no_etag_part: Some(3),
            ..Default::default()
        };
        let uri = ObjectUri::parse("s3://bucket/k").unwrap();
        let err = upload(&fake, &policy(), &uri, Bytes::from(vec![0; 30]), 10)
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("UploadPart 3 answered without an ETag"),
            "{err}"
        );
        assert!(err.to_string().contains("s3://bucket/k"), "{err}");
        assert!(fake.completed.lock().unwrap().is_empty());
        assert!(*fake.aborted.lock().unwrap());
    }
}
