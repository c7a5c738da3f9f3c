"""What the tests share and is not a test: fakes, fixture builders and readers of the report's tables.

pyproject.toml puts tests/ on sys.path (pytest's `pythonpath`), so a test imports these as
`from support.fakes import ScriptedBackend`, from whatever folder it is in."""
