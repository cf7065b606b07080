//! The name of the machine's CPU, which tells a cluster's ranks apart by speed
//! ([`crate::render::TileRenderer::hardware`]).
//!
//! Linux lists it in `/proc/cpuinfo`: "model name" on x86-64, "Hardware" or "Processor" on
//! some ARM kernels, "cpu model" on MIPS. Where none is given (most aarch64 kernels print
//! only the implementer and part numbers) those numbers stand in, as they identify the core.

use std::sync::OnceLock;

/// "cpu: AMD EPYC 7B13 Processor", read once per process.
pub fn cpu_hardware() -> String {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        let model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| model_from_cpuinfo(&text));
        match model {
            Some(m) => format!("cpu: {m}"),
            None => format!("cpu: unknown {} model", std::env::consts::ARCH),
        }
    })
    .clone()
}

/// The CPU's name in the text of `/proc/cpuinfo`, spaces collapsed; `None` if it names none.
pub fn model_from_cpuinfo(text: &str) -> Option<String> {
    let field = |key: &str| {
        text.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            let v = v.split_whitespace().collect::<Vec<_>>().join(" ");
            (k.trim() == key && !v.is_empty()).then_some(v)
        })
    };
    ["model name", "Hardware", "Processor", "cpu model"]
        .into_iter()
        .find_map(field)
        .or_else(|| {
            let implementer = field("CPU implementer")?;
            let part = field("CPU part")?;
            Some(format!("implementer {implementer} part {part}"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x86_names_the_model_with_its_spaces_collapsed() {
        let text = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC  7B13 64-Core Processor\nflags\t\t: fpu\n\nprocessor\t: 1\nmodel name\t: AMD EPYC  7B13 64-Core Processor\n";
        assert_eq!(
            model_from_cpuinfo(text).as_deref(),
            Some("AMD EPYC 7B13 64-Core Processor")
        );
    }

    #[test]
    fn aarch64_without_a_name_is_told_by_implementer_and_part() {
        let text = "processor\t: 0\nBogoMIPS\t: 243.75\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x1\nCPU part\t: 0xd0c\n";
        assert_eq!(
            model_from_cpuinfo(text).as_deref(),
            Some("implementer 0x41 part 0xd0c")
        );
    }

    #[test]
    fn text_without_a_model_names_none() {
        assert_eq!(model_from_cpuinfo("processor\t: 0\nmodel name\t:\n"), None);
        assert_eq!(model_from_cpuinfo(""), None);
    }

    #[test]
    fn this_machine_has_a_cpu_name() {
        let h = cpu_hardware();
        assert!(h.starts_with("cpu: ") && h.len() > "cpu: ".len(), "{h}");
    }
}
