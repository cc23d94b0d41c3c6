//! Response and request bodies: whole buffers, and endless (or counted) zeros for load.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

/// The one body type debloat's handlers answer with.
pub type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// A whole body from bytes or a string.
pub fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).boxed()
}

/// An empty body.
pub fn empty() -> Body {
    full(Bytes::new())
}

/// `len` bytes of zeros, sent a chunk at a time (the responsiveness test's large object), or
/// until `stop` is set; every chunk handed to the connection is added to `sent`.
pub struct Zeros {
    left: u64,
    chunk: Bytes,
    stop: Option<Arc<AtomicBool>>,
    sent: Option<Arc<AtomicU64>>,
}

/// Size of one chunk of [`Zeros`]: 256 KiB.
pub const CHUNK: usize = 256 * 1024;

impl Zeros {
    /// `len` bytes of zeros.
    pub fn new(len: u64) -> Zeros {
        Zeros {
            left: len,
            chunk: Bytes::from(vec![0u8; CHUNK]),
            stop: None,
            sent: None,
        }
    }

    /// Hand it over `n` bytes at a time (at least 1): an HTTP/2 stream queues a whole chunk
    /// once it takes one, so a small chunk keeps its own buffer small.
    pub fn chunk(mut self, n: usize) -> Zeros {
        self.chunk = Bytes::from(vec![0u8; n.max(1)]);
        self
    }

    /// End early once `stop` is set.
    pub fn until(mut self, stop: Arc<AtomicBool>) -> Zeros {
        self.stop = Some(stop);
        self
    }

    /// Count what is handed over in `sent`.
    pub fn counted(mut self, sent: Arc<AtomicU64>) -> Zeros {
        self.sent = Some(sent);
        self
    }

    /// As a [`Body`].
    pub fn boxed(self) -> Body {
        BodyExt::boxed(self)
    }
}

impl HttpBody for Zeros {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let stopped = self
            .stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed));
        if self.left == 0 || stopped {
            return Poll::Ready(None);
        }
        let n = (self.left.min(self.chunk.len() as u64)) as usize;
        self.left -= n as u64;
        if let Some(s) = &self.sent {
            s.fetch_add(n as u64, Ordering::Relaxed);
        }
        Poll::Ready(Some(Ok(Frame::data(self.chunk.slice(..n)))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> SizeHint {
        match self.stop {
            Some(_) => SizeHint::default(),
            None => SizeHint::with_exact(self.left),
        }
    }
}

/// Read a body to its end, dropping its bytes and adding each frame's length to `counted`
/// as it arrives; returns the total.
pub async fn drain<B>(mut body: B, counted: Option<&AtomicU64>) -> Result<u64, B::Error>
where
    B: HttpBody<Data = Bytes> + Unpin,
{
    let mut total = 0u64;
    while let Some(frame) = body.frame().await {
        if let Ok(d) = frame?.into_data() {
            total += d.len() as u64;
            if let Some(c) = counted {
                c.fetch_add(d.len() as u64, Ordering::Relaxed);
            }
        }
    }
    Ok(total)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn zeros_give_exactly_their_length_and_stop_when_told() {
        let sent = Arc::new(AtomicU64::new(0));
        let n = drain(Zeros::new(3 * CHUNK as u64 + 5).counted(sent.clone()), None)
            .await
            .unwrap();
        assert_eq!(n, 3 * CHUNK as u64 + 5);
        assert_eq!(sent.load(Ordering::Relaxed), n);
        assert_eq!(
            drain(Zeros::new(10_000).chunk(4096), None).await.unwrap(),
            10_000
        );
        let stop = Arc::new(AtomicBool::new(true));
        assert_eq!(
            drain(Zeros::new(u64::MAX).until(stop), None).await.unwrap(),
            0
        );
    }
}
