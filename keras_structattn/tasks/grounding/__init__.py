"""Visual grounding (referring expressions): RefCOCO data and the heads' losses.

Modules:
    refcoco: RefCOCO refs with their boxes, box IoU, grounding targets,
        accuracy and the biggest-proposal baseline.
    heads: the grounding heads' ranking and regression losses and box
        selection (MUAN / DDPN). See docs/grounding.md.
    report: accuracy next to the biggest-proposal baseline, its table, and
        pictures of the ranked proposals.
"""

from keras_structattn.tasks.grounding.refcoco import RefExpression
from keras_structattn.tasks.grounding.refcoco import box_iou
from keras_structattn.tasks.grounding.refcoco import grounding_accuracy
from keras_structattn.tasks.grounding.refcoco import grounding_targets
from keras_structattn.tasks.grounding.refcoco import read_refs
