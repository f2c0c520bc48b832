//! Error bodies read up to `MAX_ERROR_BODY`: the SDK reads an error response's body whole
//! before parsing it, so a hostile or broken endpoint could make it buffer gigabytes. S3's
//! error documents are a few hundred bytes; the rest is cut off before the SDK sees it.

use aws_sdk_s3::config::interceptors::BeforeDeserializationInterceptorContextMut;
use aws_sdk_s3::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_s3::primitives::SdkBody;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use sluice_core::wire::MAX_ERROR_BODY;
use std::pin::Pin;
use std::task::{Context, Poll};

#[derive(Debug)]
pub struct BoundErrorBodies;

impl Intercept for BoundErrorBodies {
    fn name(&self) -> &'static str {
        "BoundErrorBodies"
    }

    fn modify_before_deserialization(
        &self,
        context: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let response = context.response_mut();
        if response.status().is_success() {
            return Ok(());
        }
        let body = std::mem::replace(response.body_mut(), SdkBody::taken());
        *response.body_mut() =
            body.map(|b| SdkBody::from_body_1_x(Truncated::new(b, MAX_ERROR_BODY)));
        Ok(())
    }
}

/// `inner`, ending after `left` bytes.
struct Truncated<B> {
    inner: B,
    left: usize,
}

impl<B> Truncated<B> {
    fn new(inner: B, left: usize) -> Self {
        Self { inner, left }
    }
}

impl<B> Body for Truncated<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(mut data) => {
                    data.truncate(self.left);
                    self.left -= data.len();
                    Poll::Ready(Some(Ok(Frame::data(data))))
                }
                Err(trailers) => Poll::Ready(Some(Ok(trailers))),
            },
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0 || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let mut hint = SizeHint::new();
        hint.set_upper(self.left as u64);
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn keeps_at_most_the_bound() {
        let big = http_body_util::Full::new(Bytes::from(vec![b'a'; 200_000]));
        let got = Truncated::new(big, MAX_ERROR_BODY).collect().await.unwrap();
        assert_eq!(got.to_bytes().len(), MAX_ERROR_BODY);
        let small = http_body_util::Full::new(Bytes::from_static(b"<Error/>"));
        let got = Truncated::new(small, MAX_ERROR_BODY)
            .collect()
            .await
            .unwrap();
        assert_eq!(got.to_bytes(), Bytes::from_static(b"<Error/>"));
    }
}
