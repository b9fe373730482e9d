//! What one client may hold at the connection level: a share of the connections, no answer that waits forever
//! for a reader, and no wait without end for a request's head.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

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

/// When a connection began waiting for its next request's head: at its start, then whenever an answer is ready.
/// While a request is being served it waits for nothing (its body has its own timeout, its answer
/// [`WriteTimeout`]). Shared by the connection's service, which marks both moments, and its [`HeaderTimeout`].
pub struct Waiting {
    opened: Instant,
    /// Milliseconds after `opened` plus one; 0 while a request is being served.
    since: AtomicU64,
}

impl Waiting {
    pub fn new() -> Arc<Self> {
        Arc::new(Self { opened: Instant::now(), since: AtomicU64::new(1) })
    }

    /// A request's head has arrived.
    pub fn served(&self) {
        self.since.store(0, Ordering::Relaxed);
    }

    /// Its answer is ready: the wait for the next head starts.
    pub fn answered(&self) {
        let ms = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
        self.since.store(ms + 1, Ordering::Relaxed);
    }

    fn deadline(&self, timeout: Duration) -> Option<Instant> {
        match self.since.load(Ordering::Relaxed) {
            0 => None,
            since => Some(self.opened + Duration::from_millis(since - 1) + timeout),
        }
    }
}

/// A stream whose reads fail once a request's head has been awaited for longer than `timeout`: a client that
/// opens a connection and sends nothing, or a head a byte at a time (slow loris), would otherwise hold its place
/// under the connection cap for good; it is also the idle keep-alive limit.
///
/// Why not hyper's `header_read_timeout`: it allocates and registers a fresh timer for every request, which
/// showed in the session check's profile. Here one timer per connection is armed once and moved forward only
/// when it fires early (the wait it was armed for ended with a request), so a busy connection pays for two
/// relaxed stores and a clock read per request.
pub struct HeaderTimeout<S> {
    stream: S,
    waiting: Arc<Waiting>,
    timeout: Duration,
    timer: Option<Pin<Box<Sleep>>>,
}

impl<S> HeaderTimeout<S> {
    pub fn new(stream: S, waiting: Arc<Waiting>, timeout: Duration) -> Self {
        Self { stream, waiting, timeout, timer: None }
    }

    /// Whether the head now awaited is overdue. Leaves the timer armed at or before the deadline, so that a
    /// silent client's task is woken to find out.
    fn overdue(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(deadline) = self.waiting.deadline(self.timeout) else { return false };
        // Armed at the deadline of an earlier wait at worst: deadlines only move forward.
        let timer = self.timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        while timer.as_mut().poll(cx).is_ready() {
            if Instant::now() >= deadline {
                return true;
            }
            timer.as_mut().reset(deadline);
        }
        false
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for HeaderTimeout<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.overdue(cx) {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "no request head in time")));
        }
        Pin::new(&mut this.stream).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for HeaderTimeout<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
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

    /// The wait for a head starts at the connection and again at every answer, and stops while a request is
    /// served; a connection that sends nothing in time is then closed with `TimedOut`. (Each read here is a new
    /// poll, as hyper's reads are.)
    #[tokio::test]
    async fn the_header_deadline_follows_the_requests() {
        use tokio::io::AsyncReadExt;
        use tokio::time::timeout;
        let (_client, server) = tokio::io::duplex(64);
        let waiting = Waiting::new();
        let mut stream = HeaderTimeout::new(server, Arc::clone(&waiting), Duration::from_millis(300));
        let mut buf = [0u8; 8];
        assert!(timeout(Duration::from_millis(150), stream.read(&mut buf)).await.is_err(), "not overdue yet");
        waiting.served();
        assert!(timeout(Duration::from_millis(400), stream.read(&mut buf)).await.is_err(), "no deadline while served");
        waiting.answered();
        let answered = Instant::now();
        assert_eq!(stream.read(&mut buf).await.map_err(|e| e.kind()), Err(io::ErrorKind::TimedOut));
        assert!(answered.elapsed() >= Duration::from_millis(300), "the wait restarted at the answer");
    }
}
