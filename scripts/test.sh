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

# Lint first: seconds, and a finding fails the build like a failed test. lint-imports checks the
# import contracts of pyproject.toml (the layer order, no cycles), imports inside functions included.
lint() { .venv/bin/ruff check . && .venv/bin/lint-imports --no-cache; }
step lint lint
# unit tests on every core (pytest-xdist): pure logic and recorded outputs, nothing shared between them
step unit "$py" -m pytest -v -p no:cacheprovider -n auto tests/unit "$@"
# The integration tests would build or start the clusters on first use; doing it here first keeps the
# build's minutes out of the first test's time and in a line of their own.
step builds .venv/bin/poc cluster up --slurm --k8s --provider native --quiet

# The integration tests in three lanes, chosen by marker, that together select every test exactly once.
# Slurm's tests and those of the native Kubernetes (with the local baseline's, which need no cluster)
# touch disjoint clusters, nodes and processes, and spend most of their time waiting on cluster
# timeouts (SlurmdTimeout, node-monitor-grace-period, requeue holds, pod start), so those two lanes run
# side by side; the tests that only read the clusters (marker readonly: `poc check`, the light client)
# run in the second lane too; the tests that change both clusters at once (the end-to-end campaigns,
# audit) run after them, alone. Each line of a lane's output starts with its name.
LANE_SLURM='slurm and not k8s'
LANE_K8S='(not slurm and (k8s or local)) or readonly'
LANE_BOTH="not ($LANE_SLURM) and not ($LANE_K8S)"
lane() {  # lane NAME EXPR ARGS...: pytest on the tests EXPR selects; "none selected" (exit 5) is not a failure
  local name=$1 expr=$2 rc=0
  shift 2
  PYTHONUNBUFFERED=1 "$py" -m pytest -v -p no:cacheprovider tests/integration -m "$expr" "$@" 2>&1 \
    | sed -u "s/^/[$name] /" || rc=${PIPESTATUS[0]}
  (( rc == 5 )) && rc=0
  return "$rc"
}
integration() {
  local rc=0 rc_s=0 rc_k=0 p_s p_k
  lane slurm "$LANE_SLURM" "$@" & p_s=$!
  lane k8s "$LANE_K8S" "$@" & p_k=$!
  wait "$p_s" || rc_s=$?
  wait "$p_k" || rc_k=$?
  echo "[test] lanes slurm and k8s+local done after $(( $(date +%s) - t_int )) s (exit $rc_s, $rc_k)"
  lane both "$LANE_BOTH" "$@" || rc=$?
  echo "[test] lane both done (exit $rc)"
  # every lane runs, so one CI run names every failure; the first failure decides the exit code
  for r in "$rc_s" "$rc_k" "$rc"; do (( r != 0 )) && return "$r"; done
  return 0
}
t_int=$(date +%s)
step integration integration "$@"
echo "[test] split: ${split[*]}"
