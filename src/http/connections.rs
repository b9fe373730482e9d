//! What one client may hold at the connection level: a share of the connections, and no answer that waits
//! forever for a reader.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// Open connections per client address (IPv6: per /64, as the rate limits count), capped.
#[derive(Clone)]
pub struct AddressSlots {
    max: usize,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One connection's place in [`AddressSlots`]; given back when dropped.
pub struct Slot {
    key: IpAddr,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl AddressSlots {
    pub fn new(max: usize) -> Self {
        Self { max, open: Arc::default() }
    }

    /// A place for one more connection from `ip`, or `None` when that address holds its share already.
    pub fn take(&self, ip: IpAddr) -> Option<Slot> {
        let key = super::rate_limits::key(ip);
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(key).or_insert(0);
        if *count >= self.max {
            return None;
        }
        *count += 1;
        Some(Slot { key, open: Arc::clone(&self.open) })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// A stream whose writes fail once they have made no progress for `timeout`: a client that pipelines requests
/// and never reads the answers would otherwise hold its connection, and its place under the cap, for good.
/// The timer exists only while a write is blocked, so a client that reads costs nothing extra.
pub struct WriteTimeout<S> {
    stream: S,
    timeout: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteTimeout<S> {
    pub fn new(stream: S, timeout: Duration) -> Self {
        Self { stream, timeout, stalled: None }
    }

    fn progress<T>(&mut self, polled: Poll<io::Result<T>>, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.stalled = None;
            return polled;
        }
        let timeout = self.timeout;
        let stalled = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "the client stopped reading"))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteTimeout<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteTimeout<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.progress(polled, cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.progress(polled, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_flush(cx);
        this.progress(polled, cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_gets_its_share_and_gets_it_back() {
        let slots = AddressSlots::new(2);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let (first, _second) = (slots.take(a).unwrap(), slots.take(a).unwrap());
        assert!(slots.take(a).is_none());
        assert!(slots.take("192.0.2.2".parse().unwrap()).is_some(), "another address is not affected");
        let _v6 =
            (slots.take("2001:db8::1".parse().unwrap()).unwrap(), slots.take("2001:db8::2".parse().unwrap()).unwrap());
        assert!(slots.take("2001:db8::3".parse().unwrap()).is_none(), "one /64 is one client");
        drop(first);
        assert!(slots.take(a).is_some());
    }
}
