# The echo interface bench/run rpc measures Cap'n Proto RPC with
# (docs/benchmarks.md).
@0xb6f6a4c3e2d17a95;

interface Echo {
  echo @0 (data :Data) -> (data :Data);
}
