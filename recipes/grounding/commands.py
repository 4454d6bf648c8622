"""The commands of the grounding recipe (flags: `recipes.grounding`):
`GroundingTask`, the hooks of `recipes._vl.Task`. Status goes to stderr,
results to stdout (`_cli.emit`).
"""

import collections
import os

import keras
import numpy as np

from keras_structattn.data.shapes_world.writers import features_path
from keras_structattn.data.word_vocab import WordVocab
from keras_structattn.tasks.grounding import heads as grounding_heads
from keras_structattn.tasks.grounding import refcoco
from keras_structattn.tasks.grounding import report as grounding_report
from keras_structattn.tasks.vqa.vqa import records_report
from keras_structattn.training.run_folder import write_json
from models.vqa.muan import MUANGrounding
from recipes import _vl
from recipes import grounding

BASELINE_NAME = "the biggest region proposal"
IOU_THRESHOLD = 0.5


def gt_boxes(split):
    """The referred boxes of a split's expressions, normalised `[E, 4]`."""
    return np.stack([r.normalized_box() for r in split.records])


class Encoded(_vl.RegionEncoded):
    """A split's expressions and region proposals; the ranking and box
    regression targets of the run's `--target`."""

    def batch(self, rows):
        """`(inputs, {"scores": target distribution [B, N], "box_deltas":
        packed regression targets [B, N, 5]})` of the expressions `rows`."""
        inputs = self.inputs(rows)
        gt = np.stack([self.split.records[i].normalized_box() for i in rows])
        settings = self.trained.settings
        targets = refcoco.grounding_targets(inputs["boxes"], inputs["region_mask"], gt,
                                            target=settings["target"],
                                            threshold=settings["iou_threshold"])
        # Eq. 13 averages over the n proposals: every real one is regressed.
        packed = grounding_heads.regression_targets_numpy(
            inputs["boxes"], gt, inputs["region_mask"].astype("float32"))
        return inputs, {"scores": targets["target_distribution"], "box_deltas": packed}


class GroundingTask(_vl.RegionTask):
    """Referring expressions: MUAN ranks the region proposals and refines
    the top one's box; correct at IoU > 0.5 with the referred box."""

    RECIPE, MODEL_TYPE, WORLD_TASKS, ENCODED = grounding, "grounding", "refs", Encoded
    VOCAB_FILES = {"words": ("vocab.json", WordVocab.load)}
    TEXT_KEY, TEXT_LENGTH = "expression", "max_expression_length"
    ITEMS, DONE, PREDICTED = "expressions", "grounded", "boxes"
    PICTURES = "grounding"

    def load_splits(self, needed):
        """`{split: Split}` of the `needed` split names the refs have."""
        args = self.args
        if self.data_given:
            refs, instances, folder = args.refs, args.instances, None
        else:
            folder = self.world_folder()
            refs, instances = (os.path.join(folder, "refs", f) for f in ("refs.json",
                                                                          "instances.json"))
        records, report = refcoco.read_refs(refs, instances, splits=list(needed),
                                            skip_invalid=args.skip_invalid)
        self._ref_sizes = {r.image_id: r.image_size for r in records}
        print(f"[data] refs: {records_report(report)}")
        by_split = collections.defaultdict(list)
        for record in records:
            by_split[record.split].append(record)
        return {name: self.read_split(name, by_split[name],
                                      args.features or features_path(folder, name),
                                      lambda r: f"ref {r.ref_id}")
                for name in needed if by_split.get(name)}

    def image_sizes(self, records):
        """--image_sizes', else the instances' sizes of the refs' images."""
        return super().image_sizes(records) or self._ref_sizes

    def train_names(self):
        return self.args.train_split, self.args.val_split

    def eval_names(self):
        return (self.args.split,)

    def no_split(self, name):
        flag = "--train_split" if name == self.args.train_split else "--split"
        return f"the refs have no '{name}' expressions ({flag})"

    def annotated(self, split):
        return True  # every ref has its box

    def new_vocabs(self, splits, settings, hparams):
        return {"words": self.word_vocab(splits[self.args.train_split])}

    def new_model(self, hparams, vocabs, word_vectors, seed):
        return MUANGrounding.from_hparams(hparams, vocabs["words"].vocab_size,
                                          word_vectors=word_vectors, seed=seed)

    def compile_args(self, hparams):
        return {"loss": {"scores": grounding_heads.RankLoss(),
                         "box_deltas": grounding_heads.BoxRegressionLoss()},
                "loss_weights": {"scores": hparams.rank_weight,
                                 "box_deltas": hparams.regression_weight}}

    def model_name(self, settings):
        return "MUAN grounding"

    def decode(self, trained, split, rows, inputs, outputs):
        """`(box [4] normalised, region scores [N] softmaxed)` of each
        expression: the top proposal's refined box."""
        predicted, _ = grounding_heads.predict_boxes(outputs["scores"], outputs["box_deltas"],
                                                     inputs["boxes"])
        scores = keras.ops.softmax(keras.ops.cast(outputs["scores"], "float32"), axis=-1)
        return list(zip(keras.ops.convert_to_numpy(predicted)[: len(rows)],
                        keras.ops.convert_to_numpy(scores)[: len(rows)]))

    def accuracy(self, trained, split):
        boxes = np.stack([box for box, _ in self.predict_split(trained, split)])
        accuracy, _ = refcoco.grounding_accuracy(boxes, gt_boxes(split), IOU_THRESHOLD)
        return 100.0 * float(accuracy)

    def results(self, split, predicted):
        """`[{ref_id, sent_id, image_id, bbox [x, y, w, h] pixels}]`."""
        return [{"ref_id": r.ref_id, "sent_id": r.sent_id, "image_id": r.image_id,
                 "bbox": r.pixel_xywh(box)} for r, (box, _) in zip(split.records, predicted)]

    def result_line(self, result):
        return f"{result['sent_id']}\t{result['image_id']}\t" + " ".join(map(str,
                                                                            result["bbox"]))

    def report(self, split, splits, predicted, trained):
        """Accuracy (IoU > 0.5 with the referred box) next to the
        biggest-proposal baseline (`grounding_report.score_summary`)."""
        summary, correct = grounding_report.score_summary(
            np.stack([box for box, _ in predicted]), gt_boxes(split),
            [split.store.regions(r.image_id)[1] for r in split.records], IOU_THRESHOLD)
        results = [dict(result, correct=bool(ok))
                   for result, ok in zip(self.results(split, predicted), correct)]
        write_json(self.output_file(f"{self.args.split}_scores.json"), summary)
        print(f"[eval] baseline: {BASELINE_NAME}")
        return results, summary, grounding_report.score_table(self.args.split, summary)

    def draw(self, trained, encoded, k, prediction, image):
        """`grounding_report.draw_expression` of the model's proposals."""
        record = encoded.split.records[k]
        box, probabilities = prediction
        _, boxes = encoded.split.store.regions(record.image_id)
        n = min(len(boxes), trained.hparams.max_regions)
        picture, iou = grounding_report.draw_expression(image, record, boxes[:n],
                                                        probabilities[:n], box)
        return picture, record.sent_id, f"{record.sentence}\tIoU {iou:.2f}"


run = GroundingTask.run  # what `recipes._cli.recipe_main` calls
