"""The README's Python example runs as written."""

import re

from conftest import REPO


def test_readme_example_runs(capsys):
    text = (REPO / "README.md").read_text()
    section = text[text.index("\n## Python\n"):]
    section = section[: section.index("\n## ", 1)]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "the README's Python section has no example"
    exec(compile(blocks[0], "README.md (Python example)", "exec"), {})
    out = capsys.readouterr().out
    assert "ProcessorStats(" in out and "frames=4" in out
