"""How many runs a platform would need to settle a criterion the campaign left open.

The standard normal-approximation sample size for a test on log-ratios, from the spread the campaign
observed, made larger for the rank tests the report uses (their efficiency against the t-test on normal
data is 3/π, so a rank test needs π/3 times the runs: Lehmann, Nonparametrics, ch. 2 and 4):

  difference (two-sided, level alpha, power 1 - beta):  n = ((z(1 - alpha/2) + z(1 - beta)) · sd / delta)²
  equivalence (two one-sided tests at alpha, true ratio delta inside the margin):
                                                       n = ((z(1 - alpha) + z(1 - beta/2)) · sd / (ln m − |delta|))²

Paired (within-round log-ratios d): sd is the spread of d and n counts rounds. Unpaired: sd is the pooled
spread of the two sides' logs and each side needs n = 2 (...)². A result is never below the smallest n at
which the test can reach alpha at all (6 rounds for the exact signed-rank test, MIN_N a side for the
rank-sum test), since the formula does not know that floor.
"""
from __future__ import annotations

import math
from statistics import NormalDist

ALPHA = 0.05
POWER = 0.80
RANK_EFFICIENCY = 3 / math.pi      # asymptotic relative efficiency of a rank test against the t-test
PAIRED_FLOOR = 6                   # the exact signed-rank test's smallest two-sided p is 2/2^n: below 0.05 from 6
UNPAIRED_FLOOR = 5                 # the report's MIN_N a side

_z = NormalDist().inv_cdf


def floor(paired: bool, alpha: float = ALPHA) -> int:
    """The fewest runs a side at which the exact test can reach `alpha` at all: every round one way
    (2 / 2^n, signed-rank) or the two sides fully apart (2 / C(2n, n), rank-sum, at least MIN_N)."""
    n = PAIRED_FLOOR if paired else UNPAIRED_FLOOR
    while (2 / 2 ** n if paired else 2 / math.comb(2 * n, n)) >= alpha:
        n += 1
    return n


def n_difference(delta: float, sd: float, paired: bool = True, alpha: float = ALPHA,
                 power: float = POWER) -> int | None:
    """Runs a platform (rounds, when paired) for the rank test to find a true log-ratio `delta` with
    probability `power` at two-sided level `alpha`; None where delta is 0 or sd is unknown."""
    if not (math.isfinite(delta) and math.isfinite(sd)) or delta == 0 or sd < 0:
        return None
    core = ((_z(1 - alpha / 2) + _z(power)) * sd / abs(delta)) ** 2
    n = (core if paired else 2 * core) / RANK_EFFICIENCY
    return max(floor(paired, alpha), math.ceil(n - 1e-9))


def n_equivalence(delta: float, sd: float, margin: float, paired: bool = True, alpha: float = ALPHA,
                  power: float = POWER) -> int | None:
    """Runs a platform for the 1 − 2·alpha interval of the ratio to fall inside [1/margin, margin] with
    probability `power`, if the true log-ratio is `delta`; None where |delta| is not inside the margin
    (no n shows equivalence then) or sd is unknown."""
    room = math.log(margin) - abs(delta)
    if not (math.isfinite(delta) and math.isfinite(sd)) or sd < 0 or room <= 0:
        return None
    core = ((_z(1 - alpha) + _z(1 - (1 - power) / 2)) * sd / room) ** 2
    n = (core if paired else 2 * core) / RANK_EFFICIENCY
    return max(floor(paired), math.ceil(n - 1e-9))


def assumption(alpha: float = ALPHA, family: int = 1, power: float = POWER) -> str:
    """The one line a reader needs to redo the numbers. family: the questions Holm adjusts together; alpha is
    then the level the strictest step asks (ALPHA / family), for a difference and an equivalence alike."""
    level = f"{alpha:.2g}" + (f" (= {ALPHA:g} / {family}, Holm's strictest step over the {family} Kubernetes-vs-"
                              "Slurm questions)" if family > 1 else "")
    return (f"Runs needed: normal approximation from the spread of the observed log-ratios, taking the observed "
            f"ratio as the true one, × π/3 for the rank tests, never below the exact test's floor; α = {level}, "
            f"power {power:.0%}; equivalence: two one-sided tests at that α within each metric's margin.")
