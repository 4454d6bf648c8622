"""Sizes, counters and answer distributions of a generated world.

`ANSWER_SHARE_CAPS` states, per question type, the largest share one
answer may have among a type's questions (in an unbiased split of a few
hundred scenes or more); `summarize` reports the largest share seen and
`format_report` flags a type above its cap (the tests hold the generator
to these caps).
"""

import collections

# Largest share of one answer within a question type (VQA, then TextVQA).
ANSWER_SHARE_CAPS = {
    "vqa": {"count": 0.35, "color": 0.3, "shape": 0.4, "exist": 0.6, "relation": 0.3},
    "textvqa": {
        "written_on": 0.1, "direction": 0.1, "host_shape": 0.45,
        "host_color": 0.35, "count_signs": 0.6,
    },
}
TOP_ANSWERS = 5


def answer_distribution(records):
    """The answer distribution of VQA-like records, per question type.

    Args:
        records: dicts with `"question_type"` and `"answer"`.

    Returns:
        `{question_type: {"questions", "distinct", "max_share", "top"}}`:
        the count, the number of distinct answers, the share of the most
        frequent one and the top answers with their shares.
    """
    by_type = collections.defaultdict(collections.Counter)
    for r in records:
        by_type[r["question_type"]][r["answer"]] += 1
    out = {}
    for t, counts in sorted(by_type.items()):
        total = sum(counts.values())
        top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_ANSWERS]
        out[t] = {
            "questions": total,
            "distinct": len(counts),
            "max_share": top[0][1] / total,
            "top": [[a, round(c / total, 3)] for a, c in top],
        }
    return out


def summarize(world):
    """A JSON-ready summary: sizes, counters, answer distributions, bias.

    Args:
        world: a `ShapesWorld` from `generate`.

    Returns:
        A dict of plain Python values (`"seconds"`, `"tasks"`, `"bias"`,
        `"splits"`).
    """
    bias = world.config.bias
    out = {
        "seconds": round(world.seconds, 2),
        "tasks": list(world.tasks),
        "bias": None if bias is None else world.config.to_dict()["bias"],
        "splits": {},
    }
    for name, split in world.splits.items():
        scenes = split.scenes
        info = {
            "scenes": len(scenes),
            "shapes": sum(len(s.shapes) for s in scenes),
            "nested_shapes": sum(o.parent is not None for s in scenes for o in s.shapes),
            "signs": sum(len(s.signs) for s in scenes),
            "ocr_tokens": sum(len(s.tokens) for s in scenes),
            "seconds": round(split.seconds, 2),
            "counters": dict(sorted(split.counters.items())),
        }
        for task, records in split.tasks.items():
            flat = [r for rs in records for r in rs]
            info[task] = len(flat)
            if task in ("vqa", "textvqa"):
                info[f"{task}_answers"] = answer_distribution(flat)
            if task == "refs":
                info["refs_needing_relation"] = sum(r["needs_relation"] for r in flat)
            if task == "textvqa":
                info["textvqa_ocr_answers"] = sum(r["answer_source"] == "ocr" for r in flat)
            if bias is not None and task != "captions":
                info[f"{task}_bias_conflict"] = sum(r["bias_conflict"] for r in flat)
        if bias is not None:
            biased = [o for s in scenes for o in s.shapes if o.shape == bias.shape]
            info["bias_share"] = round(
                sum(o.color == bias.color for o in biased) / max(1, len(biased)), 3
            )
        out["splits"][name] = info
    return out


def _share_line(task, distribution):
    lines = []
    for t, info in distribution.items():
        cap = ANSWER_SHARE_CAPS[task].get(t)
        flag = "  ABOVE CAP" if cap is not None and info["max_share"] > cap else ""
        top = ", ".join(f"{a} {100 * s:.0f}%" for a, s in info["top"])
        lines.append(
            f"    {t:<12} n={info['questions']:<6} distinct={info['distinct']:<4} "
            f"max={100 * info['max_share']:.0f}% (cap {100 * cap:.0f}%){flag}  top: {top}"
        )
    return lines


def format_report(summary, baselines=None, distribution_split="train"):
    """The CLI's text report of `summarize(world)` (and the baselines).

    Args:
        summary: the dict of `summarize`.
        baselines: None, or the dict of `baselines.trivial_baselines`.
        distribution_split: the split whose answer distributions are shown
            (another one if it was not generated).

    Returns:
        The report as one string.
    """
    lines = [
        f"Shapes world: tasks {', '.join(summary['tasks'])}; "
        f"generated in {summary['seconds']:.1f} s"
    ]
    header = ["split", "scenes", "shapes", "nested", "signs", "tokens"]
    tasks = [t for t in ("captions", "vqa", "refs", "textvqa") if t in summary["tasks"]]
    lines.append("  " + " ".join(f"{h:>8}" for h in header + tasks) + "  seconds")
    for name, info in summary["splits"].items():
        cells = [
            name,
            info["scenes"],
            info["shapes"],
            info["nested_shapes"],
            info["signs"],
            info["ocr_tokens"],
        ]
        cells += [info[t] for t in tasks]
        lines.append("  " + " ".join(f"{c:>8}" for c in cells) + f"  {info['seconds']:.1f}")
    lines.append("  retries / fallbacks / skipped items:")
    for name, info in summary["splits"].items():
        counters = ", ".join(f"{k} {v}" for k, v in info["counters"].items()) or "none"
        lines.append(f"    {name}: {counters}")
        extra = []
        if "refs_needing_relation" in info:
            extra.append(f"refs needing a relation {info['refs_needing_relation']}")
        if "textvqa_ocr_answers" in info:
            extra.append(f"textvqa OCR answers {info['textvqa_ocr_answers']}")
        if "bias_share" in info:
            extra.append(f"bias: share of the biased colour {info['bias_share']:.2f}")
            extra += [f"{k} {v}" for k, v in info.items() if k.endswith("_bias_conflict")]
        if extra:
            lines.append("      " + "; ".join(extra))
    if distribution_split in summary["splits"]:
        split = distribution_split
    else:
        split = next(iter(summary["splits"]))
    info = summary["splits"][split]
    if summary.get("bias") and split in summary["bias"]["splits"]:
        lines.append(
            "  (the caps are for unbiased splits: "
            "colour answers of a biased split are skewed on purpose)"
        )
    for task in ("vqa", "textvqa"):
        if f"{task}_answers" in info:
            lines.append(f"  {task} answers per question type ({split}):")
            lines += _share_line(task, info[f"{task}_answers"])
    if baselines:
        lines.append(
            f"  trivial baselines (priors from {baselines['prior_split']}, "
            f"scored on {baselines['evaluate_split']}):"
        )
        for task in ("vqa", "textvqa"):
            if task in baselines:
                b = baselines[task]
                per = ", ".join(f"{t} {v:.1f}" for t, v in b["per_type"].items())
                lines.append(
                    f"    {task} majority per type: {b['overall']:.2f}% VQA accuracy ({per})"
                )
        if "refs" in baselines:
            b = baselines["refs"]
            lines.append(
                f"    grounding biggest box: {b['accuracy']:.2f}% at IoU>=0.5 "
                f"(random shape box {b['random_box']:.2f}%, {b['refs']} refs)"
            )
        if "captions" in baselines:
            b = baselines["captions"]
            if b["caption_metric"] == "pycocoevalcap":
                lines.append(
                    f"    captioning biggest shape ('{b['example']}'): CIDEr-D {b['CIDEr']:.3f}, "
                    f"BLEU-4 {b['BLEU_4']:.3f} ({b['images']} images)"
                )
            else:
                lines.append(f"    captioning biggest shape: {b}")
    return "\n".join(lines)


__all__ = ["ANSWER_SHARE_CAPS", "answer_distribution", "summarize", "format_report"]
