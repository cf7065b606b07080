//! How ranks reach each other: nonblocking point-to-point byte messages.
//!
//! A frame's ranks ([`super::rank`]) see only this trait. Three transports implement it:
//! [`Alone`], one process rendering by itself (rank 0 of one, which talks to no one); MPI
//! (`crate::cluster::mpi`, behind the `mpi` feature); and [`ChannelTransport`], ranks as
//! threads of one process joined by channels, which runs the very same protocol in plain
//! `cargo test` with no MPI installed.
//!
//! Only one thread of a rank (its progress loop) uses the transport.

use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Why a transport failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TransportError {
    /// Another rank ended the job (MPI_Abort): the message it gave.
    #[error("the job was aborted by rank {rank}: {message}")]
    Aborted { rank: usize, message: String },
    /// Sends still pending when the rank wanted to leave.
    #[error("{pending} messages were still being sent after {waited_ms} ms")]
    Stuck { pending: usize, waited_ms: u64 },
    #[error("{call} failed: {detail}")]
    Call { call: &'static str, detail: String },
}

/// Nonblocking point-to-point messaging between the ranks of one job.
pub trait Transport {
    /// This rank's number, `0..size()`.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn size(&self) -> usize;
    /// The machine this rank runs on, for messages; empty where it says nothing (one
    /// process).
    fn host(&self) -> String {
        String::new()
    }
    /// How many ranks share this rank's machine (and so its cores).
    fn local_ranks(&self) -> usize {
        1
    }
    /// Starts sending `bytes` to rank `to` and returns at once; the transport keeps the
    /// buffer until the send completes. Messages from one rank to another arrive in order.
    fn send(&mut self, to: usize, bytes: Vec<u8>) -> Result<(), TransportError>;
    /// A message that has arrived, with its sender, if any; never waits.
    fn poll(&mut self) -> Result<Option<(usize, Vec<u8>)>, TransportError>;
    /// Waits (up to `timeout`) for this rank's pending sends to complete, before it leaves.
    fn flush(&mut self, timeout: Duration) -> Result<(), TransportError>;
    /// Ends the whole job because of `message` (MPI_Abort: every rank is killed and
    /// `mpirun` exits non-zero). The MPI transport does not return; the channel transport
    /// makes every other rank's next `poll` fail with [`TransportError::Aborted`].
    fn abort(&mut self, message: &str);
}

/// One process rendering a frame by itself: rank 0 of one. Its messages to itself never
/// reach the transport.
#[derive(Clone, Copy, Debug, Default)]
pub struct Alone;

impl Transport for Alone {
    fn rank(&self) -> usize {
        0
    }

    fn size(&self) -> usize {
        1
    }

    fn send(&mut self, to: usize, _bytes: Vec<u8>) -> Result<(), TransportError> {
        Err(TransportError::Call {
            call: "send",
            detail: format!("rank {to} does not exist: this process renders alone"),
        })
    }

    fn poll(&mut self) -> Result<Option<(usize, Vec<u8>)>, TransportError> {
        Ok(None)
    }

    fn flush(&mut self, _timeout: Duration) -> Result<(), TransportError> {
        Ok(())
    }

    fn abort(&mut self, _message: &str) {}
}

/// The state every channel rank shares: who aborted the job, and why.
#[derive(Debug, Default)]
struct Shared {
    aborted: Mutex<Option<(usize, String)>>,
}

/// Ranks as threads of one process: `ChannelTransport::create(n)` gives one transport per
/// rank, each to be moved to its own thread.
#[derive(Debug)]
pub struct ChannelTransport {
    rank: usize,
    senders: Vec<Sender<(usize, Vec<u8>)>>,
    inbox: Receiver<(usize, Vec<u8>)>,
    shared: Arc<Shared>,
}

impl ChannelTransport {
    pub fn create(size: usize) -> Vec<ChannelTransport> {
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..size).map(|_| channel()).unzip();
        let shared = Arc::new(Shared::default());
        receivers
            .into_iter()
            .enumerate()
            .map(|(rank, inbox)| ChannelTransport {
                rank,
                senders: senders.clone(),
                inbox,
                shared: shared.clone(),
            })
            .collect()
    }

    fn check_aborted(&self) -> Result<(), TransportError> {
        let a = self
            .shared
            .aborted
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match &*a {
            Some((rank, message)) => Err(TransportError::Aborted {
                rank: *rank,
                message: message.clone(),
            }),
            None => Ok(()),
        }
    }
}

impl Transport for ChannelTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.senders.len()
    }

    fn send(&mut self, to: usize, bytes: Vec<u8>) -> Result<(), TransportError> {
        self.check_aborted()?;
        // A message to a rank that has left is lost, as with a dead MPI process; the
        // protocol's liveness check notices the silence.
        let _ = self.senders[to].send((self.rank, bytes));
        Ok(())
    }

    fn poll(&mut self) -> Result<Option<(usize, Vec<u8>)>, TransportError> {
        self.check_aborted()?;
        match self.inbox.try_recv() {
            Ok(m) => Ok(Some(m)),
            Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => Ok(None),
        }
    }

    fn flush(&mut self, _timeout: Duration) -> Result<(), TransportError> {
        Ok(())
    }

    fn abort(&mut self, message: &str) {
        let mut a = self
            .shared
            .aborted
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        a.get_or_insert((self.rank, message.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_arrive_in_order_with_their_sender() {
        let mut t = ChannelTransport::create(3);
        t[2].send(0, vec![1]).unwrap();
        t[2].send(0, vec![2]).unwrap();
        t[1].send(0, vec![3]).unwrap();
        let mut got = Vec::new();
        while let Some(m) = t[0].poll().unwrap() {
            got.push(m);
        }
        assert_eq!(got, vec![(2, vec![1]), (2, vec![2]), (1, vec![3])]);
        assert_eq!(t[1].poll().unwrap(), None);
    }

    #[test]
    fn an_abort_reaches_every_rank() {
        let mut t = ChannelTransport::create(2);
        t[1].abort("boom");
        let e = t[0].poll().unwrap_err();
        assert_eq!(
            e,
            TransportError::Aborted {
                rank: 1,
                message: "boom".into()
            }
        );
    }
}
