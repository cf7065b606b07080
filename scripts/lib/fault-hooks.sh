# shellcheck shell=bash
# The test hooks' environment variables (src/fault_injection.rs, compiled only with the cargo
# feature fault-injection), for the scripts that must know whether a binary has them (sourced,
# not run). Their names are read from that file, the one place that lists them.

# fault_hook_names: the variables' names, one a line.
fault_hook_names() {
    grep -o '"GASWORKS_[A-Z0-9_]*"' "$(dirname "${BASH_SOURCE[0]}")/../../src/fault_injection.rs" \
        | tr -d '"' | sort -u
}

# has_fault_hooks BIN: whether BIN was built with the feature: it holds a hook's name. (Each
# name is there only where its hook is reachable: GASWORKS_TEST_FAULT only with feature mpi.)
has_fault_hooks() {
    local name
    for name in $(fault_hook_names); do
        grep -qaF "$name" "$1" && return 0
    done
    return 1
}
