"""Every relative link and image in the README and docs/ resolves (scripts/check_links.py), and the
checker itself tells a broken link, a missing image and a wrong heading anchor from good ones."""
from __future__ import annotations

import importlib.util

from support.paths import ROOT

_spec = importlib.util.spec_from_file_location("check_links", ROOT / "scripts" / "check_links.py")
check_links = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_links)


def test_readme_and_docs_links_resolve():
    files = check_links.default_files()
    assert ROOT / "README.md" in files and any(f.parent.name == "docs" for f in files)
    assert [b for f in files for b in check_links.broken_links(f)] == []


def test_the_checker_reports_what_does_not_resolve(tmp_path):
    (tmp_path / "other.md").write_text("# Other page\n\n## 10. Cleanup: `keep_run_files`\n", encoding="utf-8")
    (tmp_path / "chart.png").write_bytes(b"\x89PNG")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n"
        "[ok](other.md#10-cleanup-keep_run_files) ![ok](chart.png) [ok](#page) [web](https://example.org/x)\n"
        "[gone](missing.md) ![gone](charts/none.png) [bad anchor](other.md#no-such-heading)\n"
        "`[code](not-a-link.md)`\n"
        "```\n[fenced](not-a-link-either.md)\n```\n",
        encoding="utf-8")
    broken = check_links.broken_links(page)
    assert [b.split(": ", 1)[1] for b in broken] == [
        "missing.md: no such file",
        "charts/none.png: no such file",
        "other.md#no-such-heading: no heading #no-such-heading in " + str(tmp_path / "other.md"),
    ]


def test_ci_runs_the_readme_test_command():
    """The README's second command at the top is the tests; .ci/run must run exactly that, after setup."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [ln for ln in block.splitlines() if ln.strip() and not ln.startswith("#")]
    assert len(lines) == 2 and all(ln.startswith("bash scripts/setup.sh && ") for ln in lines), lines
    test_command = lines[1].removeprefix("bash scripts/setup.sh && ")
    ci = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
          if ln.strip() and not ln.lstrip().startswith("#")]
    assert "bash scripts/setup.sh" in ci
    assert test_command in ci and ci.index(test_command) > ci.index("bash scripts/setup.sh")
