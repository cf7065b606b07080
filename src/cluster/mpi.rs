//! The MPI transport (feature `mpi`): nonblocking sends (`MPI_Isend`) and matched probes
//! (`MPI_Improbe` + `MPI_Mrecv`) over a private duplicate of `MPI_COMM_WORLD`, through the
//! `mpi` crate (rsmpi) on the system's MPI library (OpenMPI on Debian).
//!
//! Only the thread that initialized MPI calls it (`MPI_THREAD_FUNNELED`): the rank's progress
//! loop. The one piece of `unsafe` here keeps each outgoing and incoming buffer alive, owned
//! by the transport, until its request completes.
//!
//! Receives never wait: a probed message is received with `MPI_Imrecv`, and one whose bytes
//! are still to come (a large message goes by rendezvous: over shared memory, the receiver
//! copies it out of the sender's memory) stays in flight until a later poll finds it done.
//! A sender that dies mid-transfer leaves its receive in flight forever; a blocking
//! `MPI_Mrecv` then hung rank 0 for good, so that it could neither notice the silence nor
//! write what had arrived when mpirun's SIGTERM came. Messages of one sender still arrive in
//! order: while one of its receives is in flight, that sender is not probed.
//!
//! Faults: MPI's default error handler (`MPI_ERRORS_ARE_FATAL`) ends the job on a
//! communication error, and `mpirun` ends the job, naming the rank, when a process dies or
//! leaves without finishing MPI. [`Transport::abort`] is `MPI_Abort` on the world.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use mpi::request::{Request, StaticScope};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Threading;

use crate::sched::transport::{Transport, TransportError};

/// The most sends one [`MpiWorld::reap`] tests.
const REAP_BATCH: usize = 64;

/// A send in flight: its request and the buffer it reads, leaked until it completes.
struct PendingSend {
    request: Request<'static, [u8], StaticScope>,
    buffer: *mut [u8],
}

/// A receive in flight: its request, the buffer it fills (leaked until it completes) and
/// the sender.
struct PendingReceive {
    request: Request<'static, [u8], StaticScope>,
    buffer: *mut [u8],
    from: usize,
}

/// MPI, initialized for this process. Dropping it finalizes MPI.
pub struct MpiWorld {
    // Field order matters: the communicator is freed before MPI is finalized.
    comm: SimpleCommunicator,
    rank: usize,
    size: usize,
    local_size: usize,
    host: String,
    /// Sends in flight, the next to test first.
    pending: VecDeque<PendingSend>,
    /// At most one per sender.
    receiving: Vec<PendingReceive>,
    _universe: mpi::environment::Universe,
}

impl MpiWorld {
    /// Initializes MPI when an MPI launcher started this process; `None` otherwise.
    pub fn from_launcher() -> anyhow::Result<Option<MpiWorld>> {
        if !super::launcher::launched_by_mpi() {
            return Ok(None);
        }
        let (universe, threading) = mpi::initialize_with_threading(Threading::Funneled)
            .ok_or_else(|| anyhow::anyhow!("MPI_Init_thread: MPI was already initialized"))?;
        if threading == Threading::Single {
            anyhow::bail!("MPI_Init_thread: this MPI library offers no thread support (MPI_THREAD_SINGLE); gasworks needs MPI_THREAD_FUNNELED");
        }
        let world = universe.world();
        // Ranks on this node: the CPU threads of a node are shared among them.
        let local_size = world.split_shared(world.rank()).size().max(1) as usize;
        let comm = world.duplicate();
        let host = mpi::environment::processor_name().unwrap_or_else(|_| "?".into());
        Ok(Some(MpiWorld {
            rank: comm.rank() as usize,
            size: comm.size() as usize,
            comm,
            local_size,
            host,
            pending: VecDeque::new(),
            receiving: Vec::new(),
            _universe: universe,
        }))
    }

    /// Waits for every rank (`MPI_Barrier`; blocking, for the end of a job only).
    pub fn barrier(&self) {
        self.comm.barrier();
    }

    /// Frees the buffers of completed sends, testing at most [`REAP_BATCH`] of them, from
    /// where the last call stopped. A rank that stopped receiving (hung, or dead before
    /// mpirun noticed) leaves every send to it pending; testing them all on every send and
    /// poll made each call as slow as they were many, so slow that the silence was never
    /// noticed.
    fn reap(&mut self) {
        self.reap_up_to(REAP_BATCH);
    }

    fn reap_up_to(&mut self, most: usize) {
        for _ in 0..self.pending.len().min(most) {
            let Some(p) = self.pending.pop_front() else {
                break;
            };
            match p.request.test() {
                Ok(_) => {
                    // SAFETY: `buffer` came from `Box::into_raw` in `send`, and its request
                    // has completed: MPI no longer reads it, and nothing else refers to it.
                    drop(unsafe { Box::from_raw(p.buffer) });
                }
                Err(request) => self.pending.push_back(PendingSend {
                    request,
                    buffer: p.buffer,
                }),
            }
        }
    }

    /// The first receive in flight that has completed, with its sender.
    fn completed_receive(&mut self) -> Option<(usize, Vec<u8>)> {
        let mut done = None;
        let mut still = Vec::with_capacity(self.receiving.len());
        for r in self.receiving.drain(..) {
            if done.is_some() {
                still.push(r);
                continue;
            }
            match r.request.test() {
                // SAFETY: `buffer` came from `Box::into_raw` in `receive`, and its request has
                // completed: MPI no longer writes it, and nothing else refers to it.
                Ok(_) => done = Some((r.from, unsafe { Box::from_raw(r.buffer) }.into_vec())),
                Err(request) => still.push(PendingReceive { request, ..r }),
            }
        }
        self.receiving = still;
        done
    }

    /// Starts receiving a probed message of `len` bytes from `from`: its bytes if they are
    /// all here already, else `None` and the receive stays in flight.
    fn receive(
        &mut self,
        message: mpi::point_to_point::Message,
        len: usize,
        from: usize,
    ) -> Option<Vec<u8>> {
        let buffer: *mut [u8] = Box::into_raw(vec![0u8; len].into_boxed_slice());
        // SAFETY: the buffer is leaked here and freed only once its request has completed
        // (below, or in `completed_receive`), or never, if it does not: it outlives every
        // write MPI makes to it, and nothing else refers to it meanwhile.
        let data: &'static mut [u8] = unsafe { &mut *buffer };
        let request = message.immediate_matched_receive_into(StaticScope, data);
        match request.test() {
            // SAFETY: as in `completed_receive`.
            Ok(_) => Some(unsafe { Box::from_raw(buffer) }.into_vec()),
            Err(request) => {
                self.receiving.push(PendingReceive {
                    request,
                    buffer,
                    from,
                });
                None
            }
        }
    }
}

impl Drop for MpiWorld {
    fn drop(&mut self) {
        self.reap_up_to(usize::MAX);
        // A send that never completed (its receiver is gone): MPI may still read the buffer,
        // so neither the buffer nor the request may be freed. Leak both; the process is
        // ending.
        for p in self.pending.drain(..) {
            std::mem::forget(p.request);
        }
        // So is a receive whose sender died mid-transfer: MPI may still write its buffer.
        for r in self.receiving.drain(..) {
            std::mem::forget(r.request);
        }
    }
}

impl Transport for MpiWorld {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn host(&self) -> String {
        self.host.clone()
    }

    fn local_ranks(&self) -> usize {
        self.local_size
    }

    fn send(&mut self, to: usize, bytes: Vec<u8>) -> Result<(), TransportError> {
        self.reap();
        let to = i32::try_from(to).map_err(|_| TransportError::Call {
            call: "MPI_Isend",
            detail: format!("rank {to} out of range"),
        })?;
        let buffer: *mut [u8] = Box::into_raw(bytes.into_boxed_slice());
        // SAFETY: the buffer is leaked here and freed only in `reap`, after its request has
        // completed (or never, if it does not), so it outlives every use MPI makes of it.
        let data: &'static [u8] = unsafe { &*buffer };
        let request = self
            .comm
            .process_at_rank(to)
            .immediate_send(StaticScope, data);
        self.pending.push_back(PendingSend { request, buffer });
        Ok(())
    }

    fn poll(&mut self) -> Result<Option<(usize, Vec<u8>)>, TransportError> {
        self.reap();
        if let Some(done) = self.completed_receive() {
            return Ok(Some(done));
        }
        // With no receive in flight, any sender; else only the senders without one, so that
        // a sender's next message cannot overtake the one still arriving.
        let probed = if self.receiving.is_empty() {
            self.comm.any_process().immediate_matched_probe()
        } else {
            (0..self.size)
                .filter(|&r| self.receiving.iter().all(|p| p.from != r))
                .find_map(|r| {
                    self.comm
                        .process_at_rank(r as i32)
                        .immediate_matched_probe()
                })
        };
        let Some((message, status)) = probed else {
            return Ok(None);
        };
        let from = status.source_rank() as usize;
        let len = usize::try_from(status.count(u8::equivalent_datatype())).map_err(|_| {
            TransportError::Call {
                call: "MPI_Get_count",
                detail: format!("a message from rank {from} of undefined length"),
            }
        })?;
        Ok(self.receive(message, len, from).map(|bytes| (from, bytes)))
    }

    fn flush(&mut self, timeout: Duration) -> Result<(), TransportError> {
        let start = Instant::now();
        loop {
            self.reap();
            if self.pending.is_empty() {
                return Ok(());
            }
            if start.elapsed() >= timeout {
                return Err(TransportError::Stuck {
                    pending: self.pending.len(),
                    waited_ms: start.elapsed().as_millis() as u64,
                });
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    fn abort(&mut self, message: &str) {
        crate::console::write_whole(format_args!(
            "error: rank {} of {} ({}) ends the job: {message}",
            self.rank, self.size, self.host
        ));
        self.comm.abort(1)
    }
}
