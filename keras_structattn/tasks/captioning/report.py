"""Result tables of caption scores and hallucination rates, as text lines.

`score_table` prints corpus scores (`keras_structattn.metrics.CaptionScores`)
of one or more captioners side by side, one line per metric, in
pycocoevalcap's names and order; `hallucination_table` adds CHAIR-style
colour-shape hallucination rates
(`keras_structattn.data.shapes_world.hallucination`) under the same columns.
"""

# The metrics of a score table, in pycocoevalcap's names and order.
METRICS = ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "ROUGE_L", "CIDEr", "SPICE")
# The rows of a hallucination table: (label, key of the rates).
HALLUCINATION_ROWS = (("CHAIR_i", "chair_i"), ("CHAIR_s", "chair_s"),
                      ("biased", "biased_pair"), ("biased@cf", "biased_pair_conflict"))


def _row(label, values, cell):
    return f"{label:10s}" + "".join(cell(v) if v is not None else f" {'-':>14s}"
                                    for v in values)


def score_table(columns):
    """Result lines: a header, then one line per metric.

    A metric the first column scored is shown for every column ("-" where
    another column lacks it); a metric the first column could not compute
    (METEOR, SPICE without Java) is one line saying why.

    Args:
        columns: `{title: CaptionScores}`, the main captioner's first.

    Returns:
        A list of lines (no newlines).
    """
    titles = list(columns)
    first = columns[titles[0]]
    lines = [f"{'metric':10s}" + "".join(f" {t:>14s}" for t in titles)]
    lines += [_row(name, [columns[t].scores.get(name) for t in titles], lambda v: f" {v:14.4f}")
              for name in METRICS if name in first.scores]
    lines += [f"{name:10s} {why}" for name, why in first.not_computed.items()]
    return lines


def hallucination_table(columns, titles):
    """Result lines of colour-shape hallucination rates, in percent.

    Args:
        columns: `{title: rates}` (`hallucination_rates`' dicts); empty for
            data without scenes.
        titles: the score table's column titles, in order ("-" under a
            title without rates).

    Returns:
        A list of lines: the rows the first rates have (none for no rates).
    """
    if not columns:
        return []
    first = next(iter(columns.values()))
    return [_row(label, [columns.get(t, {}).get(key) for t in titles],
                 lambda v: f" {100 * v:13.2f}%")
            for label, key in HALLUCINATION_ROWS if key in first]


def captioner_table(entries):
    """Result lines: one captioner (model, floor or oracle) a line, with its
    CIDEr-D, BLEU-4 and fact precision / recall / F1 (`world_scores`).

    Args:
        entries: `{name: entry}` of `world_scores.score_captioners`, in the
            order to print.

    Returns:
        A list of lines (no newlines).
    """
    width = max(len("captioner"), *(len(name) for name in entries))
    lines = [f"{'captioner':{width}s}   CIDEr-D    BLEU-4  fact P  fact R  fact F1  claims"]
    for name, e in entries.items():
        f = e["facts"]
        lines.append(f"{name:{width}s} {e['scores']['CIDEr']:9.4f} {e['scores']['Bleu_4']:9.4f}"
                     f" {f['precision']:7.3f} {f['recall']:7.3f} {f['f1']:8.3f}"
                     f" {f['claims_per_caption']:7.2f}")
    return lines


def group_table(entries, names):
    """Result lines of CIDEr-D per template group, a column per captioner.

    Args:
        entries: `world_scores.score_captioners`' dict.
        names: the captioners to show, in order.

    Returns:
        A list of lines: a header, then one line per group.
    """
    groups = sorted({g for name in names for g in entries[name]["cider_by_group"]})
    lines = [f"{'group':14s}" + "".join(f" {n[:14]:>14s}" for n in names)]
    for g in groups:
        lines.append(f"{g:14s}" + "".join(
            f" {entries[n]['cider_by_group'][g]:14.4f}" if g in entries[n]["cider_by_group"]
            else f" {'-':>14s}" for n in names))
    return lines


def bias_probe_line(name, probe, bias):
    """The result line of the colour probe (`bias_probe.colour_log_odds`).

    Args:
        name: the captioner's name.
        probe: the probe's dict.
        bias: `(shape, colour)` of the confounder.

    Returns:
        One line (no newline).
    """
    shape, colour = bias
    if not probe["positions"]:
        return (f"colour probe ({name}): no reference colour word before '{shape}' on the "
                "conflict images")
    return (f"colour probe ({name}), teacher-forced at the colour word before '{shape}' on "
            f"{probe['images']} conflict images ({probe['positions']} positions): log p(true) "
            f"- log p({colour}) = {probe['log_odds']:+.3f}; p(true) {probe['p_true']:.3f}, "
            f"p({colour}) {probe['p_biased']:.3f}; {colour} likelier at "
            f"{100 * probe['biased_preferred']:.1f}% of them")
