"""Image captioning data: caption files and caption id batches.

Modules:
    coco_captions: caption files (Karpathy's splits, COCO captions, split
        lists) and caption id batches.

The image features are `keras_structattn.data.image_features`, the word
vocabulary `keras_structattn.data.word_vocab`, the scores
`keras_structattn.metrics.coco_caption`.
"""

from keras_structattn.tasks.captioning.coco_captions import CaptionReport
from keras_structattn.tasks.captioning.coco_captions import ImageCaptions
from keras_structattn.tasks.captioning.coco_captions import caption_batch
from keras_structattn.tasks.captioning.coco_captions import caption_ids
from keras_structattn.tasks.captioning.coco_captions import read_coco_captions
from keras_structattn.tasks.captioning.coco_captions import read_karpathy
from keras_structattn.tasks.captioning.coco_captions import read_split_list
