"""M4C / SA-M4C model inputs and teacher-forcing targets of TextVQA
records (`M4CBatches`)."""

import numpy as np

from keras_structattn.ops import spatial_graph
from keras_structattn.tasks.textvqa import textvqa
from keras_structattn.tasks.textvqa.features import detector_boxes
from keras_structattn.tasks.textvqa.features import ocr_features
from keras_structattn.tasks.textvqa.features import random_graph

# M4C and SA-M4C train on the same targets (docs/textvqa.md, "Targets"):
# SA-M4C's, where every index that writes the step's word is a positive.
# With M4C's own (one sampled sequence's index), a word that is both in the
# vocabulary and among the OCR tokens has one index as the positive and the
# other as a negative, switched at random from epoch to epoch.
TARGETS_ALL_COPIES = True


class M4CBatches:
    """The inputs and targets of TextVQA records, made per batch.

    Args:
        records: the `TextVQARecord`s.
        store: their features (`ImageFeatures`: `of(record)`).
        questions: int `[len(records), max_question_length]` question word
            ids.
        answer_vocab: the `AnswerWordVocab`.
        hparams: the model's hparams (`max_objects`, `max_ocr`,
            `object_feature_dim`, `ocr_feature_dim`, `num_steps`,
            `distance_threshold`; `ocr_order_vectors`: the OCR features
            end with the tokens' order vectors (`ocr_features`); and
            `box_jitter`: the boxes given to the
            model and to the graph are `detector_boxes` of the data's with
            that jitter, keyed by the image; 0 or absent: unchanged).
        spatial: SA-M4C: add the relation labels (`relations`). The
            targets are the same for both models (`TARGETS_ALL_COPIES`).
        random: replace the spatial labels by a fixed random graph per
            question (`random_graph`, seeded by `seed` and the row).
        seed: the run's seed (the random graphs, the drawn answers).
        word_vectors: the OCR tokens' `OcrWordVectors`, or None.
    """

    def __init__(self, records, store, questions, answer_vocab, hparams, *, spatial=False,
                 random=False, seed=0, word_vectors=None):
        self.records, self.store, self.questions = records, store, questions
        self.answer_vocab, self.hparams = answer_vocab, hparams
        self.spatial, self.random, self.seed = spatial, random, seed
        self.word_vectors = word_vectors
        self._phoc = {}
        self._targets = {}

    def __len__(self):
        return len(self.records)

    def inputs(self, rows):
        """The model inputs (no `previous`) of the records `rows` (a dict
        of arrays, padded to the hparams' sizes)."""
        h = self.hparams
        b, n, t = len(rows), h.max_objects, h.max_ocr
        out = {"question": self.questions[rows],
               "objects": np.zeros((b, n, h.object_feature_dim), np.float32),
               "object_boxes": np.zeros((b, n, 4), np.float32),
               "object_mask": np.zeros((b, n), bool),
               "ocr": np.zeros((b, t, h.ocr_feature_dim), np.float32),
               "ocr_boxes": np.zeros((b, t, 4), np.float32),
               "ocr_mask": np.zeros((b, t), bool)}
        # Runs saved before these hparams existed had neither.
        jitter = float(getattr(h, "box_jitter", 0.0))
        order = t if getattr(h, "ocr_order_vectors", False) else 0
        for k, row in enumerate(rows):
            record = self.records[row]
            objects, boxes, appearance = self.store.of(record)
            m = min(len(objects), n)
            out["objects"][k, :m] = objects[:m]
            out["object_boxes"][k, :m] = detector_boxes(
                boxes, jitter, ("objects", record.image_id))[:m]
            out["object_mask"][k, :m] = True
            tokens = record.ocr_tokens[:t]
            if tokens:
                out["ocr"][k, : len(tokens)] = ocr_features(
                    tokens, appearance[: len(tokens)], self.word_vectors, self._phoc, order)
                out["ocr_boxes"][k, : len(tokens)] = detector_boxes(
                    record.ocr_boxes, jitter, ("ocr", record.image_id))[: len(tokens)]
                out["ocr_mask"][k, : len(tokens)] = True
        if self.spatial:
            out["relations"] = self.relations(out, rows)
        return out

    def relations(self, inputs, rows):
        """The SA-M4C relation labels `[B, Q+N+T, Q+N+T]` of the batch `inputs` of `rows`
        (the random graph of each row instead when `random`)."""
        labels = spatial_graph.textvqa_relations_numpy(
            inputs["question"] != 0, inputs["object_boxes"], inputs["object_mask"],
            inputs["ocr_boxes"], inputs["ocr_mask"], self.hparams.num_steps,
            self.hparams.distance_threshold)
        if self.random:
            labels = np.stack([random_graph(labels[k], [self.seed, int(row)])
                               for k, row in enumerate(rows)])
        return labels

    def _answer_targets(self, row):
        if row not in self._targets:
            record = self.records[row]
            self._targets[row] = textvqa.answer_sequences(
                record.answers, record.ocr_tokens, self.answer_vocab,
                max_ocr=self.hparams.max_ocr)
        return self._targets[row]

    def batch(self, rows, epoch=0):
        """A training batch.

        One answer sequence per question is drawn for teacher forcing,
        seeded by `seed`, the epoch and the question (so a resumed run
        draws what an uninterrupted one would).

        Args:
            rows: the records' indices.
            epoch: the 0-based epoch.

        Returns:
            `(inputs, scores [B, S, V + T], loss_mask [B, S])`, `inputs`
            with `previous` (`m4c_targets`).
        """
        inputs = self.inputs(rows)
        previous, scores, masks = [], [], []
        for row in rows:
            step0, sequences = self._answer_targets(row)
            sequence = None
            if sequences:
                rng = np.random.default_rng([self.seed, epoch, int(row)])
                sequence = sequences[int(rng.integers(len(sequences)))]
            p, s, m = textvqa.m4c_targets(
                step0, sequence, self.records[row].ocr_tokens, self.answer_vocab,
                num_steps=self.hparams.num_steps, max_ocr=self.hparams.max_ocr,
                all_copies=TARGETS_ALL_COPIES)
            previous.append(p)
            scores.append(s)
            masks.append(m)
        inputs["previous"] = np.stack(previous)
        return inputs, np.stack(scores), np.stack(masks)

    def coverage(self):
        """The share of questions with at least one answer sequence (the
        others give no loss): the upper bound M4C's targets allow."""
        return float(np.mean([bool(self._answer_targets(r)[1]) for r in range(len(self))]))


def dummy_inputs(hparams, spatial=False):
    """A batch of one question of the hparams' sizes, all ones and zeros:
    what builds an M4C / SA-M4C model (`spatial`: with `relations`)."""
    n, t, q = hparams.max_objects, hparams.max_ocr, hparams.max_question_length
    inputs = {"question": np.ones((1, q), "int32"),
              "objects": np.zeros((1, n, hparams.object_feature_dim), "float32"),
              "object_boxes": np.zeros((1, n, 4), "float32"),
              "object_mask": np.ones((1, n), bool),
              "ocr": np.zeros((1, t, hparams.ocr_feature_dim), "float32"),
              "ocr_boxes": np.zeros((1, t, 4), "float32"),
              "ocr_mask": np.ones((1, t), bool),
              "previous": np.ones((1, hparams.num_steps), "int32")}
    if spatial:
        length = q + n + t + hparams.num_steps
        inputs["relations"] = np.zeros((1, length, length), "int32")
    return inputs
