"""Job traces for scale replays: what a site's history (or a seeded generator) asks of a cluster.

* ``trace``: the ``Trace`` / ``TraceJob`` model, its JSON Lines file, ``compress`` and ``summary``.
* ``synthetic``: a seeded generator with the shapes published GPU-cluster studies report.
* ``sacct``: a Slurm site's own history (``sacct --json`` or ``sacct -P``) read into a ``Trace``.
* ``steady``: jobs offered at a constant rate, for throughput against offered load.
* ``outcome``: what a replay did with each job, and the figures drawn from that.
* ``saturation``: from a sweep of offered rates, where a scheduler stops keeping up.

Pure Python, no scheduler code: a replay on emulated nodes builds on this. docs/scale-traces.md says
how to export a site's history and what each decision here means for a replay.
"""
