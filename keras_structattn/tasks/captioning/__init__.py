"""Image captioning: caption files and batches, decoding, reports, pictures.

Modules:
    coco_captions: caption files (Karpathy's splits, COCO captions, split
        lists), caption id batches, COCO annotations and results.
    batches: a captioner's batches (encoder inputs, images with captions).
    decode: captions of many images, decoded in batches of one shape.
    report: the score and hallucination tables, as text lines.
    pictures: a captioner's attention (IS and CS streams, top areas).

The image features are `keras_structattn.data.image_features`, the word
vocabulary `keras_structattn.data.word_vocab`, the scores
`keras_structattn.metrics.coco_caption`.
"""

from keras_structattn.tasks.captioning.coco_captions import CaptionReport
from keras_structattn.tasks.captioning.coco_captions import ImageCaptions
from keras_structattn.tasks.captioning.coco_captions import caption_batch
from keras_structattn.tasks.captioning.coco_captions import caption_ids
from keras_structattn.tasks.captioning.coco_captions import coco_annotations
from keras_structattn.tasks.captioning.coco_captions import coco_results
from keras_structattn.tasks.captioning.coco_captions import read_coco_captions
from keras_structattn.tasks.captioning.coco_captions import read_karpathy
from keras_structattn.tasks.captioning.coco_captions import read_split_list
