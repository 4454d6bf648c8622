"""METEOR and SPICE through pycocoevalcap's jars, when Java is there.

These two COCO caption metrics have no Python implementation: pycocoevalcap
runs METEOR 1.5 (Banerjee and Lavie, 2005; Denkowski and Lavie, 2014) and
SPICE 1.0 (Anderson et al., 2016, arXiv:1607.08822) as Java programs. Here
they run the same way, through pycocoevalcap's own classes, only when they
can: `meteor_unavailable()` and `spice_unavailable()` say why not (one line,
starting "not computed: "), and the evaluator then leaves the metric out
instead of reporting a 0.

SPICE also needs the Stanford CoreNLP 3.6.0 jars, which pycocoevalcap
downloads into its `spice/lib` folder the first time SPICE runs. Nothing is
downloaded here: without those jars SPICE is not computed.
"""

import importlib.util
import os
import shutil

import numpy as np

NOT_COMPUTED = "not computed: "
_CORENLP = "stanford-corenlp-3.6.0"


def _pycocoevalcap_dir():
    # A namespace package (no __init__.py): its folder, not its __file__.
    spec = importlib.util.find_spec("pycocoevalcap")
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def _java_unavailable():
    if _pycocoevalcap_dir() is None:
        return NOT_COMPUTED + "pycocoevalcap is not installed (pip install pycocoevalcap)"
    if shutil.which("java") is None:
        return NOT_COMPUTED + "no `java` on PATH (it runs pycocoevalcap's jar)"
    return None


def meteor_unavailable():
    """None when METEOR can run, else the one-line reason it cannot."""
    reason = _java_unavailable()
    if reason is not None:
        return reason
    jar = os.path.join(_pycocoevalcap_dir(), "meteor", "meteor-1.5.jar")
    if not os.path.exists(jar):
        return NOT_COMPUTED + f"pycocoevalcap's METEOR jar is missing ({jar})"
    return None


def spice_unavailable():
    """None when SPICE can run, else the one-line reason it cannot."""
    reason = _java_unavailable()
    if reason is not None:
        return reason
    lib = os.path.join(_pycocoevalcap_dir(), "spice", "lib")
    missing = [name for name in (f"{_CORENLP}.jar", f"{_CORENLP}-models.jar")
               if not os.path.exists(os.path.join(lib, name))]
    if missing:
        return (NOT_COMPUTED + f"SPICE needs the Stanford CoreNLP 3.6.0 models "
                f"({' and '.join(missing)} in {lib}), which pycocoevalcap downloads on first "
                f"use; they are not there and nothing is downloaded here")
    return None


def meteor(gts, res):
    """METEOR 1.5 (`-l en -norm`) by pycocoevalcap's `Meteor`.

    Args:
        gts: `{image_id: [reference caption, ...]}` (tokenised strings).
        res: `{image_id: [hypothesis caption]}` with the same image ids.

    Returns:
        `(corpus, per_image)`: the corpus METEOR (computed by the jar from
        the summed statistics, not a mean of the per-image scores) and a
        float64 array of the per-image scores in gts order.

    Raises:
        RuntimeError: METEOR cannot run here (`meteor_unavailable()`) or the
            Java process failed.
    """
    reason = meteor_unavailable()
    if reason is not None:
        raise RuntimeError(reason)
    from pycocoevalcap.meteor.meteor import Meteor

    scorer = Meteor()
    try:
        corpus, per_image = scorer.compute_score(gts, res)
    except (ValueError, OSError) as error:  # the jar died: an empty line, a broken pipe
        raise RuntimeError(f"METEOR's Java process failed: {error}") from error
    finally:
        del scorer  # its __del__ stops the Java process
    return float(corpus), np.asarray(per_image, dtype=np.float64)


def spice(gts, res):
    """SPICE 1.0 by pycocoevalcap's `Spice`.

    Args:
        gts: `{image_id: [reference caption, ...]}` (tokenised strings).
        res: `{image_id: [hypothesis caption]}` with the same image ids.

    Returns:
        `(corpus, per_image)`: the mean of the per-image "All" F-scores, and
        a list with, per image in gts order, SPICE's dict of categories
        (`{"All": {"pr": ..., "re": ..., "f": ...}, "Relation": ...}`).
        pycocoevalcap's own evaluator pairs these, which SPICE returns in
        sorted image-id order, with the images in their original order;
        here each goes to its own image.

    Raises:
        RuntimeError: SPICE cannot run here (`spice_unavailable()`) or the
            Java process failed.
    """
    reason = spice_unavailable()
    if reason is not None:
        raise RuntimeError(reason)
    import subprocess

    from pycocoevalcap.spice.spice import Spice

    try:
        corpus, sorted_scores = Spice().compute_score(gts, res)
    except (subprocess.CalledProcessError, OSError, ValueError) as error:
        raise RuntimeError(f"SPICE's Java process failed: {error}") from error
    by_id = dict(zip(sorted(gts), sorted_scores))
    return float(corpus), [by_id[image_id] for image_id in gts]
