#!/usr/bin/env bash
# Fails (non-zero, with a diff) when the committed ptx/*.ptx is not what the device code
# compiles to now, or when the device code does not compile. CI runs it.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

if ! "$root/scripts/build-ptx.sh" "$tmp" >"$tmp.log" 2>&1; then
    cat "$tmp.log" >&2
    rm -f "$tmp.log"
    echo "check-ptx: the device code under ptx/ does not compile" >&2
    exit 1
fi
rm -f "$tmp.log"

status=0
for fresh in "$tmp"/*.ptx; do
    name="$(basename "$fresh")"
    committed="$root/ptx/$name"
    if [ ! -f "$committed" ]; then
        echo "check-ptx: ptx/$name is missing; run scripts/build-ptx.sh and commit it" >&2
        status=1
    elif ! diff -u "$committed" "$fresh" >&2; then
        echo "check-ptx: ptx/$name is stale; run scripts/build-ptx.sh and commit it" >&2
        status=1
    fi
done
for committed in "$root"/ptx/*.ptx; do
    [ -e "$committed" ] || continue
    name="$(basename "$committed")"
    if [ ! -f "$tmp/$name" ]; then
        echo "check-ptx: ptx/$name has no source ptx/${name%.ptx}.cu; remove it" >&2
        status=1
    fi
done
[ "$status" -eq 0 ] && echo "check-ptx: committed PTX is up to date"
exit "$status"
