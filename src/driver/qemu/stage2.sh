# crucible's microVM, second stage (PID 1 in the host's root): the network, the agent
# socket's forwarder, the variables from the agent's port, then the program, with its
# stdio on that port, and the control port's answers; when the program ends, how it
# ended goes to QEMU's exit device (QEMU exits with it).
B=/run/crucible/busybox
. /run/crucible/conf
export PATH="$PATH_IN" HOME="$HOME_IN"
$B ip link set lo up
if [ -e /sys/class/net/eth0 ]; then
    $B ip link set eth0 up
    $B ip addr add 10.0.2.15/24 dev eth0
    if [ "$NET" = host ]; then
        $B ip route add default via 10.0.2.2
        echo "nameserver 10.0.2.3" > /run/crucible/resolv.conf
        $B mount --bind /run/crucible/resolv.conf /etc/resolv.conf
    fi
    if [ -n "$SOCAT" ]; then
        "$SOCAT" "UNIX-LISTEN:/run/crucible/agent.sock,fork,mode=666" TCP:10.0.2.100:7000 2>/dev/console &
    fi
fi
port=
ctl=
for f in /sys/class/virtio-ports/*/name; do
    dev=/dev/$($B basename "$($B dirname "$f")")
    case "$($B cat "$f")" in
        crucible.io) port=$dev ;;
        crucible.ctl) ctl=$dev ;;
    esac
done
oom_kills() { $B awk '$1 == "oom_kill" { print $2 }' /proc/vmstat; }
# `cpu_secs rss_bytes processes oom_kills`: the agent's tree, and the kernel's OOM kills.
measure() {
    $B cat /proc/[0-9]*/stat 2>/dev/null | $B awk -v root="$AGENT" -v oom="$(oom_kills)" '
{ pid = $1; sub(/^.*\) /, ""); ppid[pid] = $2; cpu[pid] = $12 + $13; rss[pid] = $22 }
END {
  if (root in ppid) mine[root] = 1
  more = 1
  while (more) { more = 0; for (p in ppid) if (!(p in mine) && (ppid[p] in mine)) { mine[p] = 1; more = 1 } }
  for (p in mine) { t += cpu[p]; k += rss[p]; c++ }
  printf "%.2f %d %d %d\n", t / 100, k * 4096, c, oom + 0
}'
}
exec 3<>"$port"
while IFS= read -r crucible_var <&3 && [ -n "$crucible_var" ]; do export "$crucible_var"; done
unset crucible_var
cd "$CWD" || echo "crucible: cannot enter $CWD" > /dev/console
# The agent's processes, counted in a cgroup of their own when they are limited.
G=/sys/fs/cgroup
if [ -n "$PIDS" ]; then
    $B mount -t cgroup2 cgroup2 $G &&
        echo +pids > $G/cgroup.subtree_control &&
        $B mkdir $G/agent &&
        echo "$PIDS" > $G/agent/pids.max ||
        echo "crucible: cannot limit the agent's processes" > /dev/console
fi
before=$(oom_kills)
(
    if [ -n "$PIDS" ] && ! echo 0 > $G/agent/cgroup.procs; then
        echo "crucible: the agent is not started: its process limit cannot be applied" > /dev/console
        exit 124
    fi
    if [ "$UID_IN" = 0 ]; then
        exec "$@"
    else
        exec $B chpst -u ":$UID_IN:$GID_IN" "$@"
    fi
) <&3 >&3 2>/dev/console &
AGENT=$!
exec 3>&-
if [ -n "$ctl" ]; then
    # The reader waits while the daemon is connected; without it, reads end at once.
    (
        exec 4<>"$ctl"
        while :; do
            if IFS= read -r asked <&4; then measure >&4; else $B sleep 1; fi
        done
    ) </dev/null >/dev/null 2>/dev/console &
fi
wait "$AGENT"
rc=$?
echo "crucible: the program ended ($rc)" > /dev/console
if [ "$rc" -gt 128 ] && [ "$(oom_kills)" -gt "${before:-0}" ]; then
    said=126
elif [ "$rc" -le 124 ]; then
    said=$((rc + 1))
else
    said=127
fi
$B sync
printf "\\$(printf %o "$said")" | $B dd of=/dev/port bs=1 seek=244 count=1 conv=notrunc 2>/dev/null
$B poweroff -f
