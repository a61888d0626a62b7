#!/usr/bin/env bash
# Installs every Debian package that building and testing Sluice needs.
# Idempotent: packages already present are skipped, so a second run is quick.
#
#   scripts/bootstrap.sh          # build and test dependencies
#   scripts/bootstrap.sh bench    # those, plus the peers bench/run measures against
set -euo pipefail

case "${1:-}" in
  "" | bench) ;;
  *) echo "usage: scripts/bootstrap.sh [bench]" >&2; exit 2 ;;
esac

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libcaf-dev
  capnproto libcapnp-dev
  libspdlog-dev libfmt-dev
  doctest-dev
  libsqlite3-dev
  libibverbs-dev librdmacm-dev
  libtomlplusplus-dev libcli11-dev nlohmann-json3-dev
  libxxhash-dev libdlpack-dev libabsl-dev
  # the S3 gateway: Beast/Asio (1.81: libboost-dev 1.74 conflicts with it), OpenSSL for MD5
  libboost1.81-dev libssl-dev
  iproute2 procps
  nftables
  # the Python module and its tests: Debian's /usr/bin/python3
  python3-dev pybind11-dev python3-numpy python3-pytest python3-torch
  # the S3 gateway's tests: real S3 clients (boto3; awscli 2 is /usr/bin/aws),
  # and s3fs, a FUSE mount of a bucket (skipped where FUSE mounts are not allowed)
  python3-boto3 awscli s3cmd rclone s3fs
)

# bench/run: the real peers Sluice is compared with (redis-tools, with
# redis-cli, comes with redis-server; iperf3 for the link between hosts;
# gRPC C++ with its code generators; Cap'n Proto RPC comes with
# libcapnp-dev), taskset to pin both sides, redis-py for the Python
# module against Redis, the MQ peers: nats-server with the NATS C
# client, and hiredis for Redis Streams; nginx, serving files beside the
# S3 gateway.
bench_packages=(redis-server redis-tools iperf3 util-linux libgrpc++-dev libprotobuf-dev protobuf-compiler
                protobuf-compiler-grpc python3-redis nats-server libnats-dev libhiredis-dev nginx-light curl)
if [ "${1:-}" = bench ]; then packages+=("${bench_packages[@]}"); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "bootstrap: all ${#packages[@]} packages present"
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi

echo "bootstrap: installing ${missing[*]}"
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "bootstrap: done"
