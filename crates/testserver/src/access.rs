//! Who may do what: signed requests (checked by s3s's `SimpleAuth`) anything; unsigned
//! ones only read — GET, HEAD, list — and only in the public-read buckets, as a public
//! dataset bucket on S3 allows (`ServerOptions::public_buckets`).

use s3s::S3Result;
use s3s::access::{S3Access, S3AccessContext};
use s3s::path::S3Path;

pub struct PublicRead {
    pub buckets: Vec<String>,
}

#[async_trait::async_trait]
impl S3Access for PublicRead {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        if cx.credentials().is_some() {
            return Ok(());
        }
        let bucket = match cx.s3_path() {
            S3Path::Bucket { bucket } | S3Path::Object { bucket, .. } => Some(&**bucket),
            S3Path::Root => None,
        };
        let public = bucket.is_some_and(|b| self.buckets.iter().any(|p| p == b));
        let reads = matches!(
            cx.s3_op().name(),
            "GetObject" | "HeadObject" | "ListObjectsV2" | "ListObjects" | "HeadBucket"
        );
        if public && reads {
            Ok(())
        } else {
            Err(s3s::s3_error!(AccessDenied, "Signature is required"))
        }
    }
}
