"""The README's Python examples run as written."""

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "the README has no Python example"
    for block in blocks:
        namespace = {}
        exec(compile(block, str(README), "exec"), namespace)
    # The 2-D example reports weights over every area of an 8x8 grid.
    assert tuple(namespace["weights"].shape) == (2, 8, 7, (8 + 7 + 6) ** 2)
