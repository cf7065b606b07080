//! The MPI transport (feature `mpi`): nonblocking sends (`MPI_Isend`) and matched probes
//! (`MPI_Improbe` + `MPI_Mrecv`) over a private duplicate of `MPI_COMM_WORLD`, through the
//! `mpi` crate (rsmpi) on the system's MPI library (OpenMPI on Debian).
//!
//! Only the thread that initialized MPI calls it (`MPI_THREAD_FUNNELED`): the rank's progress
//! loop. The one piece of `unsafe` here keeps each outgoing buffer alive, owned by the
//! transport, until its send request completes.
//!
//! Faults: MPI's default error handler (`MPI_ERRORS_ARE_FATAL`) ends the job on a
//! communication error, and `mpirun` ends the job, naming the rank, when a process dies or
//! leaves without finishing MPI. [`Transport::abort`] is `MPI_Abort` on the world.

use std::time::{Duration, Instant};

use mpi::request::{Request, StaticScope};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Threading;

use super::transport::{Transport, TransportError};

/// A send in flight: its request and the buffer it reads, leaked until it completes.
struct PendingSend {
    request: Request<'static, [u8], StaticScope>,
    buffer: *mut [u8],
}

/// MPI, initialized for this process. Dropping it finalizes MPI.
pub struct MpiWorld {
    // Field order matters: the communicator is freed before MPI is finalized.
    comm: SimpleCommunicator,
    rank: usize,
    size: usize,
    local_size: usize,
    host: String,
    pending: Vec<PendingSend>,
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
            pending: Vec::new(),
            _universe: universe,
        }))
    }

    /// Ranks on this rank's node.
    pub fn local_size(&self) -> usize {
        self.local_size
    }

    /// The node's name (`MPI_Get_processor_name`).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Waits for every rank (`MPI_Barrier`; blocking, for the end of a job only).
    pub fn barrier(&self) {
        self.comm.barrier();
    }

    /// Frees the buffers of completed sends.
    fn reap(&mut self) {
        let mut still = Vec::with_capacity(self.pending.len());
        for p in self.pending.drain(..) {
            match p.request.test() {
                Ok(_) => {
                    // SAFETY: `buffer` came from `Box::into_raw` in `send`, and its request
                    // has completed: MPI no longer reads it, and nothing else refers to it.
                    drop(unsafe { Box::from_raw(p.buffer) });
                }
                Err(request) => still.push(PendingSend {
                    request,
                    buffer: p.buffer,
                }),
            }
        }
        self.pending = still;
    }
}

impl Drop for MpiWorld {
    fn drop(&mut self) {
        self.reap();
        // A send that never completed (its receiver is gone): MPI may still read the buffer,
        // so neither the buffer nor the request may be freed. Leak both; the process is
        // ending.
        for p in self.pending.drain(..) {
            std::mem::forget(p.request);
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
        self.pending.push(PendingSend { request, buffer });
        Ok(())
    }

    fn poll(&mut self) -> Result<Option<(usize, Vec<u8>)>, TransportError> {
        self.reap();
        match self.comm.any_process().immediate_matched_probe() {
            Some(probed) => {
                let (bytes, status) = probed.matched_receive_vec::<u8>();
                Ok(Some((status.source_rank() as usize, bytes)))
            }
            None => Ok(None),
        }
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
        crate::stderr_line::write_whole(format_args!(
            "error: rank {} of {} ({}) ends the job: {message}",
            self.rank, self.size, self.host
        ));
        self.comm.abort(1)
    }
}
