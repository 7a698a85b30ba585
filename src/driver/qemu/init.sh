#!/bin/busybox sh
# crucible's microVM, first stage (the initramfs's /init): loads the modules, mounts
# the host's root read-only and the session's shares over fresh tmpfs folders, then
# hands over to the second stage inside that root.
B=/bin/busybox
$B mkdir -p /proc /sys /dev /newroot /keep
$B mount -t proc proc /proc
$B mount -t sysfs sys /sys
$B mount -t devtmpfs dev /dev
for m in $($B cat /modules/order 2>/dev/null); do $B insmod "/modules/$m" 2>/dev/null; done
. /crucible/conf
O=trans=virtio,version=9p2000.L,msize=262144
$B mount -t 9p -o "$O,ro" root /newroot || { echo "crucible: cannot mount the host's root"; $B poweroff -f; }
n=0
keep() { n=$((n + 1)); $B mkdir -p "/keep/$n"; $B mount --bind "/newroot$1" "/keep/$n" && echo "$n $1" >> /keep/list; }
share() { $B mkdir -p "/newroot$2" && $B mount -t 9p -o "$O,$3" "$1" "/newroot$2" || echo "crucible: cannot mount $2"; }
keeps
$B mount -t tmpfs -o mode=1777 tmp /newroot/tmp
$B mount -t tmpfs -o mode=755 run /newroot/run
$B mkdir -p "/newroot$HOME_IN"
$B mount -t tmpfs -o "mode=700,uid=$UID_IN,gid=$GID_IN" home "/newroot$HOME_IN"
if [ -f /keep/list ]; then
    while read -r i p; do $B mkdir -p "/newroot$p" && $B mount --bind "/keep/$i" "/newroot$p"; done < /keep/list
fi
shares
$B mkdir -p /newroot/run/crucible
$B cp /bin/busybox /crucible/conf /crucible/stage2 /newroot/run/crucible/
for d in dev proc sys; do $B mount --move "/$d" "/newroot/$d"; done
exec $B switch_root /newroot /run/crucible/busybox sh /run/crucible/stage2
