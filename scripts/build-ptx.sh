#!/usr/bin/env bash
# Compile the device code (ptx/*.cu) to PTX with NVRTC from a pinned PyPI wheel; no CUDA
# toolkit and no GPU needed.
#
#   scripts/build-ptx.sh            # regenerate the committed ptx/*.ptx
#   scripts/build-ptx.sh OUT_DIR    # write the PTX elsewhere (scripts/check-ptx.sh does)
#
# The wheel lives in a venv under .ptx-venv/ (git-ignored), made on first use. NVRTC 12.2
# emits PTX ISA 8.2, which R535 drivers (CUDA 12.2, OptiX 8.0, the oldest gasworks supports)
# accept; a newer NVRTC would emit PTX those drivers reject.
set -euo pipefail

NVRTC_WHEEL="nvidia-cuda-nvrtc-cu12==12.2.140"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root/ptx}"
venv="$root/.ptx-venv"
python="${PYTHON:-python3}"

if ! "$venv/bin/python" -c "import nvidia.cuda_nvrtc" 2>/dev/null \
    || [ "$(cat "$venv/.wheel" 2>/dev/null)" != "$NVRTC_WHEEL" ]; then
    echo "build-ptx: installing $NVRTC_WHEEL into $venv" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$NVRTC_WHEEL"
    echo "$NVRTC_WHEEL" > "$venv/.wheel"
fi

exec "$venv/bin/python" "$root/scripts/nvrtc_compile.py" "$root/ptx" "$out"
