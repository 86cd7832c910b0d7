#!/bin/bash
# Runs inside the VM lane's guest, chrooted into the host's root (read-only), as
# root. scripts/vm-test copies it into the results share next to plan.sh, which
# defines REPO, THREADS, BIN_TIMEOUT, CI (the host's), the arrays TEST_NAMES /
# TEST_BINS (parallel) and LIBTEST_ARGS (filters and flags passed through to every
# test binary).
#
# For each binary NAME it writes NAME.out (stdout + stderr) and NAME.rc (exit code),
# then writes `done`. Device discovery goes to devices.env and the log to guest.log.
set -uo pipefail

results=$1
# shellcheck source=/dev/null
source "$results/plan.sh"
exec > "$results/guest.log" 2>&1

uptime_s() { cut -d' ' -f1 /proc/uptime; }
echo "guest-run: start at uptime $(uptime_s)s, kernel $(uname -r)"

# Which node is which: ask the driver (VIDIOC_QUERYCAP through v4l2-ctl), not the node
# numbering. vivid instance 0 (bus info platform:vivid-000) is the single-planar camera,
# 1 the multi-planar one, 2, 3 and 4 the single-planar webcams reserved for fault
# injection (scripts/vm/mkinitramfs sets them up).
video='' video_mplane='' webcam0='' webcam1='' webcam2=''
for node in /dev/video*; do
    [ -c "$node" ] || continue
    info=$(v4l2-ctl -d "$node" --info 2>&1) || { echo "guest-run: v4l2-ctl $node failed: $info"; continue; }
    # First "Driver name" (the V4L2 one; a media-controller section may repeat it).
    driver=$(awk -F': ' '/^[[:space:]]*Driver name/ { print $2; exit }' <<< "$info")
    [ "$driver" = vivid ] || continue
    bus=$(awk -F': ' '/^[[:space:]]*Bus info/ { print $2; exit }' <<< "$info")
    # The capability lines indented under "Device Caps": what this node does.
    caps=$(awk '/^[[:space:]]*Device Caps/ { on = 1; next } on && /^\t\t/ { sub(/^[[:space:]]+/, ""); print; next } { on = 0 }' <<< "$info")
    echo "guest-run: $node: vivid ($bus), device caps: $(tr '\n' ',' <<< "$caps")"
    if grep -qx 'Video Capture Multiplanar' <<< "$caps"; then
        [ "$bus" != platform:vivid-001 ] || video_mplane=$node
    elif grep -qx 'Video Capture' <<< "$caps"; then
        case "$bus" in
            platform:vivid-000) video=$node ;;
            platform:vivid-002) webcam0=$node ;;
            platform:vivid-003) webcam1=$node ;;
            platform:vivid-004) webcam2=$node ;;
        esac
    fi
done
echo "guest-run: vivid single-planar=${video:-none} multi-planar=${video_mplane:-none} webcams=${webcam0:-none},${webcam1:-none},${webcam2:-none}"
{
    echo "PINFRAME_VM_VIDEO=$video"
    echo "PINFRAME_VM_VIDEO_MPLANE=$video_mplane"
    echo "PINFRAME_VM_WEBCAM0=$webcam0"
    echo "PINFRAME_VM_WEBCAM1=$webcam1"
    echo "PINFRAME_VM_WEBCAM2=$webcam2"
} > "$results/devices.env"
ls -l /dev/video* /dev/dri /dev/udmabuf /dev/dma_heap 2>&1

cd "$REPO" || { echo "guest-run: cannot cd to $REPO"; echo 1 > "$results/done"; exit 1; }
mkdir -p /tmp/home/.cache
for i in "${!TEST_BINS[@]}"; do
    name=${TEST_NAMES[$i]}
    bin=${TEST_BINS[$i]}
    echo "guest-run: $name: start at uptime $(uptime_s)s"
    env -i \
        PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
        HOME=/tmp/home XDG_CACHE_HOME=/tmp/home/.cache XDG_RUNTIME_DIR=/run TMPDIR=/tmp \
        CARGO_MANIFEST_DIR="$REPO" \
        CI="${CI:-}" \
        PINFRAME_VM=1 \
        PINFRAME_VM_VIDEO="$video" \
        PINFRAME_VM_VIDEO_MPLANE="$video_mplane" \
        PINFRAME_VM_WEBCAM0="$webcam0" \
        PINFRAME_VM_WEBCAM1="$webcam1" \
        PINFRAME_VM_WEBCAM2="$webcam2" \
        LP_NATIVE_VECTOR_WIDTH=128 \
        RUST_BACKTRACE=1 \
        timeout -k 5 "$BIN_TIMEOUT" "$bin" --test-threads="$THREADS" "${LIBTEST_ARGS[@]}" \
        > "$results/$name.out" 2>&1 < /dev/null
    rc=$?
    echo "$rc" > "$results/$name.rc"
    echo "guest-run: $name: exit $rc at uptime $(uptime_s)s"
done
sync
echo 0 > "$results/done"
echo "guest-run: done at uptime $(uptime_s)s"
