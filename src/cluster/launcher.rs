//! What an MPI launcher tells a process through its environment, read without MPI: whether a
//! launcher started it, and as one of how many ranks.
//!
//! Compiled in every build: a build without the feature `mpi` that `mpirun -np 4` starts must
//! know it, or each of the four would render the whole frame into the same output.

/// The variables by which launchers mark their processes: OpenMPI's mpirun, MPICH's and Intel
/// MPI's Hydra (`PMI_*`, `MPI_LOCALNRANKS`), PMIx launchers, and Slurm's srun with PMI.
const MARKERS: [&str; 5] = [
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "PMI_RANK",
    "PMIX_RANK",
    "MPI_LOCALNRANKS",
];

/// The variables that give the number of ranks, in the order they are believed.
const SIZES: [&str; 2] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"];

/// Whether an MPI launcher (mpirun/mpiexec of OpenMPI or MPICH, srun with PMI) started this
/// process. Without one, gasworks never initializes MPI and renders as a single process.
pub fn launched_by_mpi() -> bool {
    launched_by_mpi_in(|v| std::env::var(v).ok())
}

/// The number of ranks the launcher started, with the variable that says it
/// (`("OMPI_COMM_WORLD_SIZE", 4)`); `None` without a launcher or where none of its variables
/// gives a number (PMIx alone says only the rank).
pub fn world_size() -> Option<(&'static str, usize)> {
    world_size_in(|v| std::env::var(v).ok())
}

fn launched_by_mpi_in(var: impl Fn(&str) -> Option<String>) -> bool {
    MARKERS.iter().any(|v| var(v).is_some())
}

fn world_size_in(var: impl Fn(&str) -> Option<String>) -> Option<(&'static str, usize)> {
    SIZES
        .iter()
        .find_map(|&v| Some((v, var(v)?.trim().parse().ok()?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |v| {
            pairs
                .iter()
                .find(|(k, _)| *k == v)
                .map(|(_, x)| x.to_string())
        }
    }

    #[test]
    fn no_launcher_means_no_ranks() {
        assert!(!launched_by_mpi_in(env(&[("PATH", "/bin")])));
        assert_eq!(world_size_in(env(&[("PATH", "/bin")])), None);
    }

    #[test]
    fn openmpi_and_hydra_give_their_sizes() {
        let ompi = [("OMPI_COMM_WORLD_SIZE", "4"), ("OMPI_COMM_WORLD_RANK", "2")];
        assert!(launched_by_mpi_in(env(&ompi)));
        assert_eq!(world_size_in(env(&ompi)), Some(("OMPI_COMM_WORLD_SIZE", 4)));
        let hydra = [("PMI_RANK", "0"), ("PMI_SIZE", "1")];
        assert!(launched_by_mpi_in(env(&hydra)));
        assert_eq!(world_size_in(env(&hydra)), Some(("PMI_SIZE", 1)));
    }

    #[test]
    fn a_launcher_without_a_size_is_still_a_launcher() {
        let pmix = [("PMIX_RANK", "3")];
        assert!(launched_by_mpi_in(env(&pmix)));
        assert_eq!(world_size_in(env(&pmix)), None);
        let garbled = [("OMPI_COMM_WORLD_SIZE", "many"), ("PMI_SIZE", " 2 ")];
        assert_eq!(world_size_in(env(&garbled)), Some(("PMI_SIZE", 2)));
    }
}
