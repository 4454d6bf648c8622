"""The README's Python examples run as written."""

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def python_blocks(path=README):
    """The ```python blocks of a Markdown file (default: the README)."""
    return re.findall(r"```python\n(.*?)```", pathlib.Path(path).read_text(), re.S)


def test_readme_python_blocks_run():
    blocks = python_blocks()
    assert blocks, "the README has no Python example"
    namespaces = []
    for block in blocks:
        namespaces.append({})
        exec(compile(block, str(README), "exec"), namespaces[-1])
    area = next(n for n in namespaces if "MultiHeadAreaAttention" in n)
    # The 2-D example reports weights over every area of an 8x8 grid.
    assert tuple(area["weights"].shape) == (2, 8, 7, (8 + 7 + 6) ** 2)
    graph = next(n for n in namespaces if "GraphMultiHeadAttention" in n)
    assert tuple(graph["relations"].shape) == (2, 182, 182)
    assert tuple(graph["y"].shape) == (2, 182, 768)
    positional = next(n for n in namespaces if "positional_object_attention" in n)
    assert tuple(positional["fused"].shape) == (2, 100, 512)
    for name in ("weights", "a_sem", "a_pos"):
        assert tuple(positional[name].shape) == (2, 8, 100, 14)


def test_ci_runs_the_readme_test_command_verbatim():
    commands = re.findall(r"```bash\n(.*?)```", README.read_text(), re.S)
    test_command = [c.strip() for c in commands if "tests.run_suites" in c]
    assert len(test_command) == 1
    ci = (README.parent / ".ci" / "run").read_text()
    assert test_command[0] in ci.splitlines()
