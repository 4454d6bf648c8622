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
