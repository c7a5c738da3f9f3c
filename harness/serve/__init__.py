"""The online inference probe: the load generator (load.py) and the serve_* figures (metrics.py).

The server itself is package data (harness/data/serve/serve_model.py): it runs inside the worker
image on the clusters, without the harness.
"""
