#!/bin/bash
# Fetch slurm-wlm's upstream tarball from the Debian mirror in sources.list and check it against the
# sha256 that the mirror's signed Sources index gives. Not `apt-get source`: this workplace's mirror
# serves the .orig tarball but answers 404 for the .dsc and .debian.tar.xz (seen 2026-12-06), so the
# build is upstream SchedMD 24.11.x without Debian's patches.
set -euo pipefail
mirror=$(sed -n 's/^deb \(http[^ ]*\) .*/\1/p' /etc/apt/sources.list | head -1)
info=$(apt-cache showsrc --only-source slurm-wlm | awk 'BEGIN{RS=""} {print; exit}')
dir=$(sed -n 's/^Directory: //p' <<<"$info")
read -r sum _ file < <(awk '/^Checksums-Sha256:/{f=1;next} /^[^ ]/{f=0} f && /orig\.tar/{print $1, $2, $3; exit}' <<<"$info")
echo "fetching $mirror/$dir/$file ($(sed -n 's/^Version: //p' <<<"$info"))"
wget -q -O "/src/$file" "$mirror/$dir/$file"
echo "$sum  /src/$file" | sha256sum -c -
mkdir -p /src/slurm && tar -C /src/slurm --strip-components=1 -xf "/src/$file"
