//! A read buffer under TLS. rustls reads its socket at most 4 KiB at a time (its deframer's
//! `READ_SIZE`), so a TLS body costs one `read(2)` per 4 KiB — some 860,000 system calls for
//! 3.5 GB — where curl over OpenSSL reads whole records. Reading the socket in large blocks
//! and serving rustls's small reads from that block trades each of those calls for a copy of
//! 4 KiB that is still in cache. Plain http needs none of this (hyper itself reads up to
//! `READ_BUF_MAX` at once), so only `https` connections get the buffer.

use crate::resolve::Tcp;
use futures::future::BoxFuture;
use http::Uri;
use hyper::rt::{Read, ReadBuf, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::net::TcpStream;
use tower_service::Service;

/// Bytes read from the socket at once under TLS: 16 records of 16 KiB, so that one read
/// brings many records (scripts/measure-get over https; docs/benchmarks.md).
pub const TLS_READ_BUF: usize = 256 << 10;

/// `HttpConnector` whose `https` connections read through a `TLS_READ_BUF` buffer.
#[derive(Debug, Clone)]
pub struct BufferedConnector {
    inner: Tcp,
}

impl BufferedConnector {
    pub fn new(inner: Tcp) -> Self {
        Self { inner }
    }
}

impl Service<Uri> for BufferedConnector {
    type Response = Stream;
    type Error = <Tcp as Service<Uri>>::Error;
    type Future = BoxFuture<'static, Result<Stream, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let tls = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
        let connecting = self.inner.call(uri);
        Box::pin(async move {
            let io = connecting.await?;
            Ok(Stream {
                io,
                // calloc'd: pages are only touched as far as reads fill them.
                buf: if tls {
                    vec![0; TLS_READ_BUF].into_boxed_slice()
                } else {
                    Box::default()
                },
                start: 0,
                end: 0,
            })
        })
    }
}

/// A TCP connection, with a read buffer when it carries TLS (`buf` empty otherwise).
#[derive(Debug)]
pub struct Stream {
    io: TokioIo<TcpStream>,
    buf: Box<[u8]>,
    /// `buf[start..end]` was read from the socket and not yet handed out.
    start: usize,
    end: usize,
}

impl Read for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut out: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if out.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        if this.start == this.end {
            // Nothing buffered: a read as large as the buffer goes straight to the socket.
            if out.remaining() >= this.buf.len() {
                return Pin::new(&mut this.io).poll_read(cx, out);
            }
            let mut block = ReadBuf::new(&mut this.buf);
            ready!(Pin::new(&mut this.io).poll_read(cx, block.unfilled()))?;
            let n = block.filled().len();
            (this.start, this.end) = (0, n);
            if n == 0 {
                return Poll::Ready(Ok(())); // end of stream: nothing added to `out`
            }
        }
        let n = out.remaining().min(this.end - this.start);
        out.put_slice(&this.buf[this.start..this.start + n]);
        this.start += n;
        Poll::Ready(Ok(()))
    }
}

impl Write for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, data)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }
}

impl Connection for Stream {
    fn connected(&self) -> Connected {
        self.io.connected()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Every byte arrives in order and the end of the stream is reported, whatever sizes the
    /// reader asks for (rustls's 4 KiB, a byte, more than the buffer), for https (buffered)
    /// and http (not) alike.
    #[tokio::test]
    async fn reads_of_any_size_see_the_stream_as_sent() {
        let data: Vec<u8> = (0..3 * TLS_READ_BUF + 12_345)
            .map(|i| (i % 251) as u8)
            .collect();
        for scheme in ["https", "http"] {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let sent = data.clone();
            let server = tokio::spawn(async move {
                let (mut sock, _) = listener.accept().await.unwrap();
                for piece in sent.chunks(70_000) {
                    sock.write_all(piece).await.unwrap();
                }
            });
            let mut http = hyper_util::client::legacy::connect::HttpConnector::new_with_resolver(
                crate::resolve::GuardedResolver::new(false),
            );
            http.enforce_http(false);
            let uri: Uri = format!("{scheme}://{addr}/").parse().unwrap();
            let stream = BufferedConnector::new(http).call(uri).await.unwrap();
            assert_eq!(stream.buf.is_empty(), scheme == "http", "{scheme}");
            let mut io = TokioIo::new(stream);
            let mut got = Vec::new();
            let sizes = [4096, 1, TLS_READ_BUF + 1, 100, 16 << 10];
            for i in 0.. {
                let mut chunk = vec![0; sizes[i % sizes.len()]];
                let n = io.read(&mut chunk).await.unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&chunk[..n]);
            }
            server.await.unwrap();
            assert!(
                got == data,
                "{scheme}: {} bytes read of {}",
                got.len(),
                data.len()
            );
        }
    }
}
