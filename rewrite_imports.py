"""Retargets recipes/, tests/, benchmarks/, models/ and docs/ at the names that
moved from recipes/_run.py, _replicas.py, _world.py and _curves.py into the
library (issue 33). Idempotent; run from the repository root:

    python rewrite_imports.py
"""

import glob
import re

# recipes module -> {name: the library module that now holds it}
NAMES = {
    "_run": {name: "keras_structattn.training.run_folder"
             for name in ("write_atomically", "write_json")},
    "_replicas": {"restarting": "keras_structattn.training.distribution"},
    "_world": {
        "features_path": "keras_structattn.data.shapes_world.writers",
        "scene_images": "keras_structattn.data.shapes_world.run_cache",
        "world_bias": "keras_structattn.data.shapes_world.run_cache",
        "SETTINGS_FILE": "keras_structattn.data.shapes_world.run_cache",
        "read_images": "keras_structattn.data.feature_extraction",
        "images_by_id": "keras_structattn.data.feature_extraction",
    },
}
# whole modules: recipes module -> (library package, module)
MODULES = {"_curves": ("keras_structattn.training", "curves")}
DOCS = [
    (", _curves ...", " ..."),
    ("`_curves` learning curves, ", ""),
    ("(`recipes/_replicas.py`, `restarting(..., rebatch=True)`)",
     "(`keras_structattn.training.distribution.restarting(..., rebatch=True)`)"),
    ("others keep that one (`recipes/_world.py`)",
     "others keep that one (`keras_structattn.data.shapes_world.run_cache`)"),
    ("recipes._curves", "keras_structattn.training.curves"),
    ("recipes/_curves.py", "keras_structattn/training/curves.py"),
]
FIRST_PARTY = re.compile(r"^(from|import) (keras_structattn|models|recipes|tests|benchmarks)\b")


def _key(line):
    """isort's order (ruff, force-single-line): module, then constants,
    classes, the rest."""
    module, _, name = line.partition(" import ")
    name = name.split()[0]
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return (not line.startswith("import"), module.split()[1], kind, name)


def add_import(text, line):
    """`text` with the top-level `line` among its first-party imports."""
    lines = text.split("\n")
    if line in lines:
        return text
    block = [k for k, old in enumerate(lines) if FIRST_PARTY.match(old)]
    if not block:
        block = [k for k, old in enumerate(lines) if re.match(r"(from|import) \w", old)]
        lines.insert(block[-1] + 1 if block else 0, "")
    later = [k for k in block if FIRST_PARTY.match(lines[k]) and _key(lines[k]) > _key(line)]
    lines.insert(later[0] if later else (block[-1] + 1 if block else 0), line)
    return "\n".join(lines)


def _drop_unused(text, module):
    """Removes `from recipes import <module>` lines whose scope no longer uses it."""
    lines = text.split("\n")
    use = re.compile(rf"(?<![\w.]){module}\b")
    for k in reversed(range(len(lines))):
        match = re.match(rf"([ \t]*)from recipes import {module}[ \t]*$", lines[k])
        if not match:
            continue
        indent, end = len(match.group(1)), k + 1
        if indent:  # a function's own import: its scope ends at the dedent
            while end < len(lines) and (not lines[end].strip() or
                                        len(lines[end]) - len(lines[end].lstrip()) >= indent):
                end += 1
        scope = lines[k + 1:end] if indent else lines[:k] + lines[k + 1:]
        if not any(use.search(other) for other in scope):
            blank_after = indent and k + 1 < len(lines) and not lines[k + 1].strip()
            del lines[k:k + 2 if blank_after else k + 1]
    return "\n".join(lines)


def rewrite_python(text):
    needed = set()
    for module, names in NAMES.items():
        for name, target in names.items():
            line = f"from {target} import {name}"
            old = rf"^([ \t]*)from recipes\.{module} import {name}\b(.*)$"
            text = re.sub(old, lambda m, n=line: m.group(1) + n + m.group(2) if m.group(1)
                          else _later(needed, n + m.group(2)), text, flags=re.M)
            text, count = _shorten(text, rf"(?<![\w.]){module}\.(?={name}\b)")
            if count:
                needed.add(line)
        text = _drop_unused(text, module)
    for module, (package, new) in MODULES.items():
        line = f"from {package} import {new}"
        text = re.sub(rf"^([ \t]*)from recipes import {module}[ \t]*$",
                      lambda m, n=line: m.group(1) + n if m.group(1) else _later(needed, n),
                      text, flags=re.M)
        text = _shorten(text, rf"(?<![\w.]){module}\.", f"{new}.")[0]
        text = text.replace(f"recipes.{module}", f"{package}.{new}")
    text = "\n".join(line for line in text.split("\n") if line != "\x00")
    for line in sorted(needed):
        if not re.search(rf"^{re.escape(line.split('  #')[0])}\b", text, flags=re.M):
            text = add_import(text, line)
    return text


def _shorten(text, pattern, replacement=""):
    """`re.subn` of `pattern` by `replacement` line by line, re-aligning the
    continuation lines of a call that the change made shorter or longer."""
    lines, count = text.split("\n"), 0
    for k, line in enumerate(lines):
        match = re.search(pattern, line)
        if not match:
            continue
        lines[k], n = re.subn(pattern, replacement, line)
        count += n
        shift = len(replacement) - len(match.group(0))
        depth, end = line.count("(") - line.count(")"), k + 1
        while depth > 0 and end < len(lines):
            indent = len(lines[end]) - len(lines[end].lstrip())
            if indent > match.start():
                lines[end] = " " * (indent + shift) + lines[end].lstrip()
            depth += lines[end].count("(") - lines[end].count(")")
            end += 1
    return "\n".join(lines), count


def _later(needed, line):
    """Marks a top-level import line for re-insertion in sorted order."""
    needed.add(line)
    return "\x00"


def main():
    files = [f for top in ("recipes", "tests", "benchmarks", "models")
             for f in glob.glob(f"{top}/**/*.py", recursive=True)]
    for path in sorted(files + glob.glob("docs/*.md") + ["README.md"]):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if path.endswith(".md"):
            new = text
            for old, replacement in DOCS:
                new = new.replace(old, replacement)
        else:
            new = rewrite_python(text)
        if new != text:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
            print(f"rewrote {path}")


if __name__ == "__main__":
    main()
