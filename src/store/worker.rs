//! A database connection on a thread of its own, so that a call that gets no answer can be given up
//! (PostgreSQL backend, docs/cluster.md).
//!
//! The synchronous client blocks until the server answers, and a connection frozen on the way (a stuck proxy or
//! middlebox that keeps the socket open and ACKs every packet) never answers: TCP keepalives and
//! `tcp_user_timeout` see a healthy connection, and PostgreSQL's own timeouts send their error into the same
//! frozen connection. The owner therefore hands each call to the connection's thread and waits at most a
//! deadline; past it, the worker is abandoned (its thread ends, dropping the connection, if the call ever
//! returns) and the owner starts over on a new connection. What the abandoned call did is not lost: a commit
//! that went through is in the change log, which the follower applies (see [`super::own`]).

use std::sync::mpsc;
use std::time::Duration;

type Job<C> = Box<dyn FnOnce(&mut C) + Send>;

/// The thread that owns a connection `C` and runs calls on it, one at a time.
pub(crate) struct Worker<C> {
    jobs: mpsc::Sender<Job<C>>,
}

/// A call that got no answer within its deadline: the worker must be dropped.
#[derive(Debug)]
pub(crate) struct TimedOut;

impl<C: 'static> Worker<C> {
    /// Connects with `connect` on a new thread named `name`, waiting at most `deadline`.
    pub(crate) fn start<E: Send + 'static>(
        name: &str,
        deadline: Duration,
        connect: impl FnOnce() -> Result<C, E> + Send + 'static,
    ) -> Result<Result<Self, E>, TimedOut> {
        let (jobs, queue) = mpsc::channel::<Job<C>>();
        let (ready, connected) = mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let mut conn = match connect() {
                    Ok(conn) => conn,
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                if ready.send(Ok(())).is_err() {
                    return;
                }
                // Ends when the owner drops the worker (after the call at hand returns, if it ever does).
                while let Ok(job) = queue.recv() {
                    job(&mut conn);
                }
            })
            .map_err(|_| TimedOut)?;
        match connected.recv_timeout(deadline) {
            Ok(Ok(())) => Ok(Ok(Self { jobs })),
            Ok(Err(e)) => Ok(Err(e)),
            Err(_) => Err(TimedOut),
        }
    }

    /// Runs `f` on the connection; waits at most `deadline` for its answer.
    pub(crate) fn run<T: Send + 'static>(
        &self,
        deadline: Duration,
        f: impl FnOnce(&mut C) -> T + Send + 'static,
    ) -> Result<T, TimedOut> {
        let (answer, answered) = mpsc::sync_channel(1);
        let job: Job<C> = Box::new(move |conn| {
            let _ = answer.send(f(conn));
        });
        self.jobs.send(job).map_err(|_| TimedOut)?;
        answered.recv_timeout(deadline).map_err(|_| TimedOut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_past_its_deadline_is_given_up_and_the_next_worker_answers() {
        let worker = Worker::start("test-worker", Duration::from_secs(5), || Ok::<_, ()>(0u32)).unwrap().unwrap();
        assert_eq!(
            worker
                .run(Duration::from_secs(5), |n| {
                    *n += 1;
                    *n
                })
                .unwrap(),
            1
        );
        let stuck = worker.run(Duration::from_millis(50), |_| std::thread::sleep(Duration::from_secs(2)));
        assert!(stuck.is_err(), "the frozen call is given up at its deadline");
        drop(worker);
        let next = Worker::start("test-worker", Duration::from_secs(5), || Ok::<_, ()>(7u32)).unwrap().unwrap();
        assert_eq!(next.run(Duration::from_secs(5), |n| *n).unwrap(), 7);
        let refused = Worker::<u32>::start("test-worker", Duration::from_secs(5), || Err("no database"));
        assert!(matches!(refused, Ok(Err("no database"))));
    }
}
