#!/usr/bin/env bash
# The test suite, as CI runs it: lint, the unit tests, the local clusters (built from cache or reused),
# then the integration tests against them. Prints where the time went, so CI's budget is watched.
# Extra arguments go to both pytest runs (e.g. -x, -k name).
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
if [[ ! -x $py ]]; then
  echo "ERROR no virtual environment at $PWD/.venv" >&2
  echo "TIP run ./scripts/setup.sh first" >&2
  exit 2
fi

split=()
step() {  # step NAME COMMAND...: run it, remember how long it took; the first failure ends the run
  local name=$1 t0 rc=0
  shift
  t0=$(date +%s)
  echo "[test] $name: $*"
  "$@" || rc=$?
  split+=("$name $(( $(date +%s) - t0 )) s")
  if (( rc != 0 )); then
    echo "[test] $name failed (exit $rc); split so far: ${split[*]}" >&2
    exit "$rc"
  fi
}

# Lint first: seconds, and a finding fails the build like a failed test.
step lint .venv/bin/ruff check .
step unit "$py" -m pytest -v -p no:cacheprovider tests/unit "$@"
# The integration tests would build or start the clusters on first use; doing it here first keeps the
# build's minutes out of the first test's time and in a line of their own.
step builds .venv/bin/poc cluster up --slurm --k8s --provider native --quiet
step integration "$py" -m pytest -v -p no:cacheprovider tests/integration "$@"
echo "[test] split: ${split[*]}"
