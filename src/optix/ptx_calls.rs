//! Reads the `optixTrace` calls out of the committed PTX (tests only), so that the tests of
//! each program can check what the host relies on: the payload count the pipeline is
//! compiled for, the SBT offset, stride and miss index the hit and miss records are laid out
//! for, the ray flags and the visibility mask.

/// The integer operands of one `_optix_trace_typed_32` call, each resolved from the
/// `mov.u32 %rN, value;` that set its register in the same entry function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceCall {
    pub payload_type: u32,
    pub visibility_mask: u32,
    pub ray_flags: u32,
    pub sbt_offset: u32,
    pub sbt_stride: u32,
    pub miss_index: u32,
    pub payload_count: u32,
}

/// Every trace call of `ptx`, in order. Panics (these are tests) when a call does not have
/// the 49 operands of the intrinsic (type, handle, 9 floats, 5 integers, the payload count,
/// 32 payload values) or an operand is not a constant.
pub fn trace_calls(ptx: &str) -> Vec<TraceCall> {
    let mut calls = Vec::new();
    for entry in ptx.split(".entry ").skip(1) {
        for line in entry
            .lines()
            .filter(|l| l.contains("_optix_trace_typed_32"))
        {
            let operands = line
                .split("_optix_trace_typed_32, (")
                .nth(1)
                .and_then(|rest| rest.split(')').next())
                .unwrap_or_else(|| panic!("no operand list: {line}"));
            let operands: Vec<&str> = operands.split(',').map(str::trim).collect();
            assert_eq!(operands.len(), 49, "operands of {line}");
            let value = |i: usize| constant(entry, operands[i]);
            calls.push(TraceCall {
                payload_type: value(0),
                visibility_mask: value(11),
                ray_flags: value(12),
                sbt_offset: value(13),
                sbt_stride: value(14),
                miss_index: value(15),
                payload_count: value(16),
            });
        }
    }
    calls
}

/// The value of `operand` in `function`: a literal, or the register's `mov.u32` of one.
fn constant(function: &str, operand: &str) -> u32 {
    if let Ok(v) = operand.parse() {
        return v;
    }
    let set = format!("{operand}, ");
    let values: Vec<u32> = function
        .lines()
        .map(str::trim)
        .filter_map(|l| l.strip_prefix("mov.u32"))
        .map(str::trim)
        .filter_map(|l| l.strip_prefix(&set))
        .filter_map(|v| v.trim_end_matches(';').parse().ok())
        .collect();
    match values[..] {
        [v] => v,
        _ => panic!("{operand} is not set once to a constant: {values:?}"),
    }
}
